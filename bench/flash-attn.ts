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
 *
 * `--grid [MODEL] [S,…] [L,…]` (default synth 15M, 4,8,16,25 sequences, 32 to 1,024 tokens): the
 * engine's case, where `auto`'s rule comes from: S sequences in a unified KV cache each holding L
 * tokens, and a decode step that adds one token to every sequence in one batch, flash attention on
 * and off; the sequences grow from one L to the next, so each context is filled once. CPU ms per
 * generated token, and which is cheaper, per (S, L); `GRID_ACTIVE=1`: one sequence generates, the rest only hold theirs; `GRID_MAX_CELLS` (default 13,000) skips the
 * points whose S x L would make filling the cache with flash attention off take minutes.
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
const models = process.argv.slice(2).length > 0 && !process.argv[2]!.startsWith('--') ? process.argv.slice(2) : [
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

/** CPU ms per generated token of a decode step of one token for each of S sequences holding L tokens each. */
async function grid(file: string, counts: number[], lengths: number[]): Promise<void> {
  if (loadPath !== 'self-built') throw new Error('--grid needs the unified KV cache of the self-built addon (swarm engine build --addon)');
  const model = await llama.loadModel({ modelPath: file });
  const maxCells = Number(process.env.GRID_MAX_CELLS ?? 13_000);
  const steps = 16;
  // GRID_ACTIVE=1: one sequence generates while the others only hold their tokens.
  const active = process.env.GRID_ACTIVE ? Number(process.env.GRID_ACTIVE) : undefined;
  const line = model.tokenize('Once upon a time a little bird flew over the green hill to find her friend the old tree. ');
  const res = new Map<string, Record<string, number>>();
  for (const n of counts) for (const fa of [true, false]) {
    const ls = lengths.filter((l) => n * l <= maxCells);
    if (ls.length === 0) continue;
    const per = Math.ceil((ls[ls.length - 1]! + steps * 2 + 64) / 256) * 256;
    const context = (await withKvUnified(llama, () => model.createContext({ contextSize: Math.min(per, model.trainContextSize), sequences: n, threads: 1, flashAttention: fa }))).value;
    const seqs = Array.from({ length: n }, () => context.getSequence());
    const tok = (i: number) => line[i % line.length]!;
    let held = 0;
    for (const l of ls) {
      // Grow every sequence to l tokens together (one batch per step of node-llama-cpp's queue).
      const add = Array.from({ length: l - held }, (_, i) => tok(held + i));
      const f = await cost(() => Promise.all(seqs.map((s) => s.evaluateWithoutGeneratingNewTokens(add))));
      held = l;
      const g = await cost(async () => {
        for (let i = 0; i < steps; i++) await Promise.all(seqs.slice(0, active ?? n).map((s) => s.evaluateWithoutGeneratingNewTokens([tok(held + i)])));
      });
      // The decode steps left `steps` more tokens in each sequence: erase them, so the next L is L.
      await Promise.all(seqs.slice(0, active ?? n).map((s) => s.eraseContextTokenRanges([{ start: held, end: held + steps }])));
      const gen = Math.round(g.cpu / (steps * (active ?? n)) * 1000) / 1000;
      const key = `${n}\0${l}`;
      res.set(key, { ...res.get(key), [fa ? 'on' : 'off']: gen });
      record({ part: 'grid', model: path.basename(file), sequences: n, held: l, setting: fa ? 'on' : 'off', ctx_per_sequence: per, fill_cpu_ms: Math.round(f.cpu), gen_cpu_ms: gen, gen_wall_ms: Math.round(g.wall / (steps * (active ?? n)) * 1000) / 1000, active: active ?? n });
      console.log(`${path.basename(file)} ${active ?? n} of ${n} sequences generating, each holding ${l} tokens, flash attention ${fa ? 'on ' : 'off'}: ${gen} ms CPU a generated token (fill ${Math.round(f.cpu)} ms CPU); load ${os.loadavg()[0]!.toFixed(1)}`);
    }
    await context.dispose();
  }
  console.log(`\n${path.basename(file)}, ms CPU per generated token, ${active ? `${active} sequence(s)` : 'all sequences'} generating, one thread (on / off, off/on):\n| sequences \\ tokens held | ${lengths.join(' | ')} |\n|---|${lengths.map(() => '---').join('|')}|`);
  for (const n of counts) console.log(`| ${n} | ${lengths.map((l) => { const r = res.get(`${n}\0${l}`); return r?.on && r.off ? `${r.on} / ${r.off} (${(r.off / r.on).toFixed(2)})` : '-'; }).join(' | ')} |`);
}

if (process.argv[2] === '--grid') {
  const list = (s: string | undefined, d: number[]) => (s ? s.split(',').map(Number) : d);
  await grid(process.argv[3] ?? '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', list(process.argv[4], [4, 8, 16, 25]), list(process.argv[5], [32, 64, 128, 256, 512, 1024]));
  process.exit(0);
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
