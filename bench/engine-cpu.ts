/**
 * CPU per generated token: the batched engine alone (in-process drivers, no hub, no workers) against
 * a bare `llama-server -np N` at the same thread count, each KV layout of both (the engine's unified
 * cache and a stream per sequence; the server with and without `-kvu`), in rounds that alternate
 * them so that a shared machine's drift falls on all of them. Tokens per CPU-second of the engine
 * process is the figure that counts on a busy machine; the medians over the rounds are reported, and
 * where the engine's CPU goes: µs per token on its main thread (for the batched engine its decode loop's
 * JavaScript), on its busiest other thread (llama.cpp's decode and the sampling: the one libuv pool
 * thread at one thread) and on the rest (V8's compiler and GC helpers, llama.cpp's other threads).
 * Each engine is warmed with over 3,000 tokens first: V8 compiles the engine's hot paths over its
 * first few thousand tokens, which a long-lived engine does not pay.
 * Modes: `bare`, `bare -kvu`, each also with `-fa off` (all of them unless some are named; the best is the bar), and the
 * batched engine with node-llama-cpp's decode loop or its own (`library …`, `direct …`), unified or a
 * stream per sequence (`… unified`, `… streams`); `direct unified fa off` fixes flash attention off;
 * `direct streams alt` loads the addon directory SWARM_BENCH_ALT_ADDON names (e.g. a copy with another
 * build's ggml CPU backend). Each run records the CPU backend library the process mapped (`cpu_backend`).
 * Run: `node dist/bench/engine-cpu.js [MODEL] [N] [R] [THREADS] [ROUNDS] [MODE,…]`; appends to
 * bench/results/engine-cpu.jsonl.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine, quantile, threadCpuSeconds } from './proc.js';
import { batchedEngine, runLoad, sharedServer, type EngineSet } from './engine-load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [model = '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', n = '8', r = '3', t = '1', k = '2', pick] = process.argv.slice(2);
const N = Number(n), R = Number(r), ROUNDS = Number(k);
const CTX = 512;

const engine = (more: Record<string, string>) => () => batchedEngine(model, N, t, CTX, fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-cpu-')), more);
const allModes: Record<string, () => Promise<EngineSet>> = {
  'bare': () => sharedServer(model, N, Number(t), CTX),
  'bare -kvu': () => sharedServer(model, N, Number(t), CTX, '-kvu'),
  // llama-server turns flash attention on for the CPU; the engine turns it off where its kernel runs scalar (flash-attn.ts): the bar is the cheaper.
  'bare -fa off': () => sharedServer(model, N, Number(t), CTX, '-fa off'),
  'bare -kvu -fa off': () => sharedServer(model, N, Number(t), CTX, '-kvu -fa off'),
  // The batched engine's two decode loops (`loop=`), each with either KV layout.
  'library unified': engine({ loop: 'library' }),
  'library streams': engine({ loop: 'library', kv_unified: '0' }),
  'direct unified': engine({ loop: 'direct' }),
  'direct streams': engine({ loop: 'direct', kv_unified: '0' }),
  // Flash attention fixed off (auto decides from the head size and the KV layout: drivers/batched/flash-attn.ts).
  'direct unified fa off': engine({ loop: 'direct', flash_attn: 'off' }),
  // The same engine on another addon directory (SWARM_BENCH_ALT_ADDON, read as SWARM_ADDON by the
  // engine it starts): e.g. one whose ggml CPU backends are another build's, side by side with this one.
  'direct streams alt': async () => {
    const was = process.env.SWARM_ADDON;
    process.env.SWARM_ADDON = process.env.SWARM_BENCH_ALT_ADDON ?? 'prebuilt';
    try { return await engine({ loop: 'direct', kv_unified: '0' })(); } finally { if (was === undefined) delete process.env.SWARM_ADDON; else process.env.SWARM_ADDON = was; }
  },
};
// Every bare server runs unless some are named: the best of them is the bar.
const picked = pick?.split(',');
const pickedBare = picked?.some((m) => m.startsWith('bare'));
// `direct streams alt` runs only when named: it needs SWARM_BENCH_ALT_ADDON to mean anything.
const modes = Object.fromEntries(Object.entries(allModes).filter(([m]) => (!picked && m !== 'direct streams alt') || picked?.includes(m) || (m.startsWith('bare') && !pickedBare)));

const WARM_TOKENS = 3072;

/** µs per token by role: the process's main thread, its busiest other thread, the rest. */
function split(pid: number, before: Map<number, number>, tokens: number): { main: number; busiest: number; rest: number } {
  const after = threadCpuSeconds(pid);
  const used = [...after].map(([tid, s]) => [tid, s - (before.get(tid) ?? 0)] as const);
  const main = used.find(([tid]) => tid === pid)?.[1] ?? 0;
  const others = used.filter(([tid]) => tid !== pid).map(([, s]) => s).sort((a, b) => b - a);
  const us = (s: number): number => Math.round(s / tokens * 1e6);
  return { main: us(main), busiest: us(others[0] ?? 0), rest: us(others.slice(1).reduce((a, b) => a + b, 0)) };
}

/** The ggml CPU backend library the process mapped (which variant, from which build), for the record. */
function cpuBackend(pid: number): string | undefined {
  try { return /\S*libggml-cpu[-\w]*\.so\S*/.exec(fs.readFileSync(`/proc/${pid}/maps`, 'utf8'))?.[0]; } catch { return undefined; }
}

const runs: { mode: string; round: number; tokens_per_s: number; tokens_per_cpu_s: number; load_1m: number; us_per_token: { main: number; busiest: number; rest: number }; cpu_backend?: string }[] = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const [mode, start] of Object.entries(modes)) {
    const set = await start();
    try {
      await runLoad(set, Math.ceil(WARM_TOKENS / 64 / N), 64); // warm: model pages, first prompts, V8's compiles
      const load_1m = os.loadavg()[0]!;
      const pid = set.pids()[0]!;
      const before = threadCpuSeconds(pid);
      const res = await runLoad(set, R, 64);
      runs.push({ mode, round, tokens_per_s: res.tokens_per_s, tokens_per_cpu_s: res.tokens_per_cpu_s, load_1m, us_per_token: split(pid, before, res.tokens), cpu_backend: cpuBackend(pid) });
      console.error(JSON.stringify(runs[runs.length - 1]));
    } finally { await set.stop(); }
  }
}
const median = (mode: string, f: 'tokens_per_s' | 'tokens_per_cpu_s'): number => quantile(runs.filter((x) => x.mode === mode).map((x) => x[f]), 0.5);
const medianUs = (mode: string, k: 'main' | 'busiest' | 'rest'): number => quantile(runs.filter((x) => x.mode === mode).map((x) => x.us_per_token[k]), 0.5);
const bestBare = Math.max(...Object.keys(modes).filter((m) => m.startsWith('bare')).map((m) => median(m, 'tokens_per_cpu_s')));
const summary = Object.fromEntries(Object.keys(modes).map((m) => [m, {
  tokens_per_s: median(m, 'tokens_per_s'), tokens_per_cpu_s: median(m, 'tokens_per_cpu_s'),
  cpu_vs_best_bare: Math.round(median(m, 'tokens_per_cpu_s') / bestBare * 100) / 100,
  us_per_token: { main: medianUs(m, 'main'), busiest: medianUs(m, 'busiest'), rest: medianUs(m, 'rest') },
}]));
const out = { bench: 'engine-cpu', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, requests: R, threads: Number(t), rounds: ROUNDS, summary, runs };
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.appendFileSync(path.join(ROOT, 'bench/results/engine-cpu.jsonl'), JSON.stringify(out) + '\n');
console.log(JSON.stringify({ summary, load: os.loadavg() }, null, 2));
process.exit(0);
