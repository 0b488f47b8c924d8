/**
 * What a running batched engine resolved at start (flash attention and why, the KV layout, threads),
 * in a file beside its pid: `swarm status` and a run's passport read it from the state dir, so they
 * show what the engine runs with, not the option as given. No node-llama-cpp here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { alive } from '../lifecycle.js';

export interface EngineInfo {
  pid: number;
  model: string;
  sequences: number;
  /** Context tokens per sequence, as the context was made. */
  ctx: number;
  kv: 'unified' | 'per sequence';
  /** Why (kv-layout.ts); absent in files of engines from before it. */
  kv_why?: string;
  binding: string;
  /** What it loads instead of its first choice after a SIGILL on this CPU, and why; absent when nothing died here. */
  fallback?: string;
  loop: 'direct' | 'library';
  /** The direct loop's step (step-loop.ts StepKind): `sync`, `fused`, `split`, `overlap`; absent in older files. */
  step?: 'sync' | 'fused' | 'split' | 'overlap';
  /** At start; `auto` goes on choosing them. */
  threads: number | string;
  flash_attn: 'on' | 'off';
  flash_attn_why: string;
}

export function writeEngineInfo(file: string, info: EngineInfo): void {
  try { fs.writeFileSync(file, JSON.stringify(info) + '\n', { mode: 0o600 }); } catch { /* only status loses it */ }
}

/** The engines of a state dir that run now (a file whose pid is gone is an engine that stopped or died). */
export function runningEngines(stateDir: string): EngineInfo[] {
  const root = path.join(stateDir, 'engines');
  let names: string[];
  try { names = fs.readdirSync(root).filter((n) => n.endsWith('.json')); } catch { return []; }
  const out: EngineInfo[] = [];
  for (const n of names) {
    try {
      const info = JSON.parse(fs.readFileSync(path.join(root, n), 'utf8')) as EngineInfo;
      if (info.pid > 0 && alive(info.pid)) out.push(info);
    } catch { /* being written, or damaged: skipped */ }
  }
  return out;
}

/** One line per engine: `flash attention off (auto: …)`, with the model where there are several. */
export function describeEngines(infos: EngineInfo[]): string[] {
  return infos.map((e) => `${infos.length > 1 ? `${path.basename(e.model)}: ` : ''}${e.sequences} sequences of ${e.ctx} tokens, KV ${e.kv}, flash attention ${e.flash_attn} (${e.flash_attn_why})${e.fallback ? `; fallback: ${e.fallback}` : ''}`);
}

/**
 * For a run's passport (`engines`): what each running engine resolved, keyed by model where there are
 * several: `flash_attention` (on or off, and why) and `batched_engine` (sequences, KV layout, loop, threads).
 */
export function passportFields(infos: EngineInfo[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of infos) {
    const key = (k: string) => (infos.length > 1 ? `${k} ${path.basename(e.model)}` : k);
    out[key('flash_attention')] = `${e.flash_attn} (${e.flash_attn_why})`;
    out[key('batched_engine')] = `${e.sequences} sequences of ${e.ctx} tokens, KV ${e.kv} (${e.binding} binding${e.kv_why ? `; ${e.kv_why}` : ''}), ${e.loop === 'direct' ? `own decode loop${e.step ? ` (${e.step} step)` : ''}` : "node-llama-cpp's decode loop"}, threads ${e.threads}`;
  }
  return out;
}
