/**
 * What flash attention costs on the CPU, per model shape: a prompt evaluated from empty, a generated
 * token (a one-token batch) after it, and a short tail of 12 tokens after it, at a few context lengths,
 * with flash attention on and off (and on with an f32 KV cache, whose scalar loops skip the f16
 * conversions). One context of one sequence per setting, one thread, in this process; CPU time of the
 * whole process (robust to a loaded machine) and wall time. Prints a table and appends each row to
 * bench/results/flash-attn.jsonl with the load average beside it.
 * Run: `npm run build && node dist/bench/flash-attn.js [MODEL...]` (default: stories260K, synth 15M, synth 110M).
 *
 * `--sequences [MODEL]` (default synth 15M): the same costs on one sequence of an engine whose other
 * sequences each hold 1,400 tokens, for 2, 4 and 8 sequences in a unified KV cache (the self-built
 * addon) and 8 with a stream per sequence, flash attention on and off: off attends over every cell
 * in use in a unified cache, all sequences', where flash attention skips the masked ones.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LlamaLogLevel, type LlamaContextSequence, type LlamaModel, type Token } from 'node-llama-cpp';
import { loadLlama } from '../drivers/embedded/load-llama.js';
import { withKvUnified } from '../drivers/batched/kv-unified.js';
import { attentionShape, flashAttnChoice } from '../drivers/batched/flash-attn.js';
import { machine } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT = path.join(ROOT, 'bench/results/flash-attn.jsonl');
const models = process.argv.slice(2).length > 0 && process.argv[2] !== '--sequences' ? process.argv.slice(2) : [
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
const record = (o: Record<string, unknown>) => {
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.appendFileSync(OUT, JSON.stringify({ bench: 'flash-attn', machine: machine(), binding: loadPath, date: new Date().toISOString(), load_avg: os.loadavg(), threads: 1, ...o }) + '\n');
};

/** One more prompt, and generated tokens after it, on an engine whose other sequences hold `held` tokens each. */
async function sequences(file: string): Promise<void> {
  const model = await llama.loadModel({ modelPath: file });
  const held = 1400;
  const toks = tokensOf(model, held + GEN);
  const cases = [...[2, 4, 8].map((n) => ({ n, unified: true })), { n: 8, unified: false }].filter((c) => !c.unified || loadPath === 'self-built');
  const out: string[] = [];
  for (const c of cases) for (const fa of [true, false]) {
    const make = () => model.createContext({ contextSize: 2048, sequences: c.n, threads: 1, flashAttention: fa });
    const context = c.unified ? (await withKvUnified(llama, make)).value : await make();
    const seqs = Array.from({ length: c.n }, () => context.getSequence());
    for (const s of seqs.slice(1)) await s.evaluateWithoutGeneratingNewTokens(toks.slice(0, held));
    const m = await measure(seqs[0]!, toks, held - TAIL - GEN);
    const row = { model: path.basename(file), sequences: c.n, kv: c.unified ? 'unified' : 'per sequence', setting: fa ? 'on' : 'off', others_hold: held, ctx: held - TAIL - GEN, ...m };
    record({ part: 'sequences', ...row });
    out.push(`| ${c.n} | ${row.kv} | ${row.setting} | ${m.prompt_cpu_ms} | ${m.gen_cpu_ms} | ${m.tail_cpu_ms} |`);
    console.log(out[out.length - 1], `load ${os.loadavg()[0]!.toFixed(1)}`);
    await context.dispose();
  }
  console.log(`\n${path.basename(file)}, the other sequences holding ${held} tokens each:\n| sequences | KV cache | flash attention | prompt of ${held - TAIL - GEN} ms CPU | generated token ms CPU | 12-token tail ms CPU |\n|---:|---|---|---:|---:|---:|\n${out.join('\n')}`);
}

if (process.argv[2] === '--sequences') {
  await sequences(process.argv[3] ?? '/work/shared/models/synth-llama-15M-shape-q8_0.gguf');
  process.exit(0);
}

const rows: Row[] = [];
for (const file of models) {
  if (!fs.existsSync(file)) { console.log(`skipped (missing): ${file}`); continue; }
  const model = await llama.loadModel({ modelPath: file });
  const shape = attentionShape(model);
  const ctxSize = Math.min(2048, model.trainContextSize);
  const toks = tokensOf(model, ctxSize);
  console.log(`${path.basename(file)}: head size ${shape?.headDim}, ${shape?.heads} heads x ${shape?.layers} layers; auto chooses ${flashAttnChoice('auto', shape, llama.systemInfo).on ? 'on' : 'off'} for one sequence`);
  for (const s of SETTINGS) {
    const context = await model.createContext({ contextSize: ctxSize, sequences: 1, threads: 1, flashAttention: s.flashAttention, ...(s.kv ? { experimentalKvCacheKeyType: s.kv, experimentalKvCacheValueType: s.kv } : {}) });
    const seq = context.getSequence();
    for (const n of LENGTHS.filter((l) => l + GEN + TAIL <= ctxSize)) {
      const row: Row = { model: path.basename(file), setting: s.name, ctx: n, ...await measure(seq, toks, n) };
      rows.push(row);
      record({ head_dim: shape?.headDim, ...row });
      console.log(`  ${s.name.padEnd(11)} ctx ${String(n).padStart(4)}: prompt ${row.prompt_cpu_ms} ms CPU (${row.prompt_wall_ms} wall), a generated token ${row.gen_cpu_ms} ms (${row.gen_wall_ms}), ${TAIL}-token tail ${row.tail_cpu_ms} ms (${row.tail_wall_ms}); load ${os.loadavg()[0]!.toFixed(1)}`);
    }
    await context.dispose();
  }
  await model.dispose();
}
console.log('\n| model | setting | context | prompt ms CPU | generated token ms CPU | 12-token tail ms CPU |\n|---|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.model} | ${r.setting} | ${r.ctx} | ${r.prompt_cpu_ms} | ${r.gen_cpu_ms} | ${r.tail_cpu_ms} |`);
process.exit(0);
