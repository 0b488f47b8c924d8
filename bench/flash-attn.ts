/**
 * What flash attention costs on the CPU, per model shape: a prompt evaluated from empty, a generated
 * token (a one-token batch) after it, and a short tail of 12 tokens after it, at a few context lengths,
 * with flash attention on and off (and on with an f32 KV cache, whose scalar loops skip the f16
 * conversions). One context of one sequence per setting, one thread, in this process; CPU time of the
 * whole process (robust to a loaded machine) and wall time. Prints a table and appends each row to
 * bench/results/flash-attn.jsonl with the load average beside it.
 * Run: `npm run build && node dist/bench/flash-attn.js [MODEL...]` (default: stories260K, synth 15M, synth 110M).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LlamaLogLevel, type LlamaContextSequence, type LlamaModel, type Token } from 'node-llama-cpp';
import { loadLlama } from '../drivers/embedded/load-llama.js';
import { attentionShape, flashAttnChoice } from '../drivers/batched/flash-attn.js';
import { machine } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT = path.join(ROOT, 'bench/results/flash-attn.jsonl');
const models = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [
  '/work/shared/models/stories260K.gguf',
  '/work/shared/models/synth-llama-15M-shape-q8_0.gguf',
  '/tmp/swarm-bench-models/synth-llama-110M-shape-q8_0.gguf',
];
const LENGTHS = [256, 1024, 1900];
const GEN = 8;
const TAIL = 12;

type Setting = { name: string; flashAttention: boolean; kv?: 'F32' };
const SETTINGS: Setting[] = [{ name: 'on', flashAttention: true }, { name: 'off', flashAttention: false }, { name: 'on, KV f32', flashAttention: true, kv: 'F32' }];

/** CPU ms of this process (all its threads) and wall ms of `f`. */
async function cost(f: () => Promise<unknown>): Promise<{ cpu: number; wall: number }> {
  const c0 = process.cpuUsage(), t0 = performance.now();
  await f();
  const c = process.cpuUsage(c0);
  return { cpu: (c.user + c.system) / 1000, wall: performance.now() - t0 };
}

function tokensOf(model: LlamaModel, n: number): Token[] {
  const line = 'Once upon a time a little bird flew over the green hill to find her friend the old tree. ';
  let toks: Token[] = [];
  while (toks.length < n) toks = [...toks, ...model.tokenize(line)];
  return toks.slice(0, n);
}

interface Row { model: string; setting: string; ctx: number; prompt_cpu_ms: number; prompt_wall_ms: number; gen_cpu_ms: number; gen_wall_ms: number; tail_cpu_ms: number; tail_wall_ms: number }

async function measure(seq: LlamaContextSequence, toks: Token[], n: number): Promise<Omit<Row, 'model' | 'setting' | 'ctx'>> {
  await seq.clearHistory();
  const p = await cost(() => seq.evaluateWithoutGeneratingNewTokens(toks.slice(0, n)));
  // One-token batches, as a generated token is evaluated.
  const g = await cost(async () => { for (let i = 0; i < GEN; i++) await seq.evaluateWithoutGeneratingNewTokens([toks[n + i]!]); });
  const t = await cost(() => seq.evaluateWithoutGeneratingNewTokens(toks.slice(n + GEN, n + GEN + TAIL)));
  const r = (x: number) => Math.round(x * 10) / 10;
  return { prompt_cpu_ms: r(p.cpu), prompt_wall_ms: r(p.wall), gen_cpu_ms: r(g.cpu / GEN), gen_wall_ms: r(g.wall / GEN), tail_cpu_ms: r(t.cpu), tail_wall_ms: r(t.wall) };
}

const { llama, path: loadPath } = await loadLlama({ logLevel: LlamaLogLevel.error, logger: () => {}, selfBuilt: true });
const rows: Row[] = [];
for (const file of models) {
  if (!fs.existsSync(file)) { console.log(`skipped (missing): ${file}`); continue; }
  const model = await llama.loadModel({ modelPath: file });
  const shape = attentionShape(model);
  const ctxSize = Math.min(2048, model.trainContextSize);
  const toks = tokensOf(model, ctxSize);
  console.log(`${path.basename(file)}: head size ${shape?.headDim}, ${shape?.heads} heads x ${shape?.layers} layers; auto chooses ${flashAttnChoice('auto', shape, llama.systemInfo).on ? 'on' : 'off'}`);
  for (const s of SETTINGS) {
    const context = await model.createContext({ contextSize: ctxSize, sequences: 1, threads: 1, flashAttention: s.flashAttention, ...(s.kv ? { experimentalKvCacheKeyType: s.kv, experimentalKvCacheValueType: s.kv } : {}) });
    const seq = context.getSequence();
    for (const n of LENGTHS.filter((l) => l + GEN + TAIL <= ctxSize)) {
      const row: Row = { model: path.basename(file), setting: s.name, ctx: n, ...await measure(seq, toks, n) };
      rows.push(row);
      fs.mkdirSync(path.dirname(OUT), { recursive: true });
      fs.appendFileSync(OUT, JSON.stringify({ bench: 'flash-attn', machine: machine(), binding: loadPath, date: new Date().toISOString(), load_avg: os.loadavg(), threads: 1, head_dim: shape?.headDim, ...row }) + '\n');
      console.log(`  ${s.name.padEnd(11)} ctx ${String(n).padStart(4)}: prompt ${row.prompt_cpu_ms} ms CPU (${row.prompt_wall_ms} wall), a generated token ${row.gen_cpu_ms} ms (${row.gen_wall_ms}), ${TAIL}-token tail ${row.tail_cpu_ms} ms (${row.tail_wall_ms}); load ${os.loadavg()[0]!.toFixed(1)}`);
    }
    await context.dispose();
  }
  await model.dispose();
}
console.log('\n| model | setting | context | prompt ms CPU | generated token ms CPU | 12-token tail ms CPU |\n|---|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.model} | ${r.setting} | ${r.ctx} | ${r.prompt_cpu_ms} | ${r.gen_cpu_ms} | ${r.tail_cpu_ms} |`);
process.exit(0);
