/**
 * A few busy agents among many idle ones on one batched engine: 3 agents generating on sequences 3, 9
 * and 17 of an engine of 25 (the other 22 connected, idle), against the same 3 agents alone on an
 * engine of 3. With a KV stream per sequence llama.cpp batches only runs of consecutive sequence ids,
 * so the spread agents cost a pass over the weights each; with a unified KV cache (self-built addon,
 * `swarm engine build --addon`) they share one. Each case runs with kv_unified on and off, fresh engines.
 * Run: `node dist/bench/busy-among-idle.js MODEL [N=25] [BUSY=3,9,17] [R=4] [THREADS=1]`;
 * appends to bench/results/batched.jsonl.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchedDriver } from '../drivers/batched/index.js';
import { findSelfBuiltAddon } from '../drivers/llama-build/addon-paths.js';
import { machine } from './proc.js';
import { runLoad, type EngineSet, type LoadResult } from './engine-load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [model = '/tmp/swarm-bench-models/synth-llama-15M-shape-q8_0.gguf', n = '25', busyArg = '3,9,17', r = '4', threads = '1'] = process.argv.slice(2);
const N = Number(n);
const busy = busyArg.split(',').map(Number);
const R = Number(r);
const TOKENS = 64;

/** The KV layout the engine reported in its log (`KV cache unified|per sequence`). */
function kvLayout(dir: string): string {
  const logs = path.join(dir, 'engines');
  const text = fs.readdirSync(logs).filter((f) => f.endsWith('.log')).map((f) => fs.readFileSync(path.join(logs, f), 'utf8')).join('\n');
  return /KV cache (unified|per sequence)/.exec(text)?.[1] ?? 'unknown';
}

/** `total` agents on a fresh engine, started one by one so that agent i holds sequence i; the `busy` ones generate. */
async function run(total: number, busyIds: number[], kvUnified: boolean): Promise<LoadResult & { kv: string; load_avg_1m_before: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-busy-'));
  const agents = Array.from({ length: total }, () => new BatchedDriver({
    name: 'batched', model, options: { dir, sequences: String(total), ctx: '512', threads, kv_unified: kvUnified ? '1' : '0' },
  }));
  for (const a of agents) await a.start();
  const active = busyIds.map((i) => agents[i]!);
  const set = { mode: 'batched', agents: active, pids: () => [agents[0]!.enginePid()!], stop: async () => {} } as unknown as EngineSet;
  try {
    await runLoad(set, 1, 16); // warm: model pages, first prompts
    const load = os.loadavg()[0]!;
    const res = await runLoad(set, R, TOKENS);
    return { ...res, kv: kvLayout(dir), load_avg_1m_before: load };
  } finally {
    const pid = agents[0]!.enginePid();
    await Promise.all(agents.map((a) => a.stop()));
    for (let i = 0; pid && i < 200; i++) { try { process.kill(pid, 0); } catch { break; } await new Promise((res) => setTimeout(res, 50)); }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const rows: Record<string, unknown>[] = [];
for (const kvUnified of [true, false]) {
  const alone = await run(busy.length, busy.map((_, i) => i), kvUnified);
  const spread = await run(N, busy, kvUnified);
  rows.push({
    kv_unified_asked: kvUnified, kv: spread.kv, alone, spread,
    spread_vs_alone: +(spread.tokens_per_s / alone.tokens_per_s).toFixed(2),
    spread_vs_alone_cpu: +(spread.tokens_per_cpu_s / alone.tokens_per_cpu_s).toFixed(2),
  });
}
const out = {
  bench: 'busy-among-idle', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, busy, requests: R, tokens: TOKENS,
  threads, addon: findSelfBuiltAddon()?.addon ?? 'prebuilt', rows,
};
fs.appendFileSync(path.join(ROOT, 'bench/results/batched.jsonl'), JSON.stringify(out) + '\n');
for (const row of rows) {
  const a = row.alone as LoadResult & { load_avg_1m_before: number }; const s = row.spread as LoadResult & { load_avg_1m_before: number };
  console.log(`kv ${String(row.kv)}: ${busy.length} busy of ${busy.length}: ${a.tokens_per_s} tok/s (load ${a.load_avg_1m_before.toFixed(1)}); ${busy.length} busy (${busyArg}) of ${N}: ${s.tokens_per_s} tok/s (load ${s.load_avg_1m_before.toFixed(1)}); ratio ${String(row.spread_vs_alone)} (per CPU-s ${String(row.spread_vs_alone_cpu)})`);
}
process.exit(0);
