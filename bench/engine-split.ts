/**
 * Two threads as two engines: N sequences on one batched engine at T threads against the same N split
 * over T engines of one thread each (a decode per engine, side by side, no barrier between the threads),
 * and a bare `llama-server -np N` at 1 and T threads, in alternating rounds. llama.cpp's threads meet
 * at a barrier after every operation of the graph, so a second thread costs CPU a token (110M shape, 25
 * sequences: ~3,450 µs a token at two threads against ~3,100 at one); engines side by side pay instead
 * a pass over the weights each per step.
 * Run: `node dist/bench/engine-split.js [MODEL] [N] [R] [T] [ROUNDS]`; appends to bench/results/engine-split.jsonl.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine } from './proc.js';
import { batchedEngine, runLoad, sharedServer, type EngineSet } from './engine-load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [model = '/tmp/swarm-bench-models/synth-llama-110M-shape-q4_k_m.gguf', n = '25', r = '2', t = '2', k = '2'] = process.argv.slice(2);
const N = Number(n), R = Number(r), T = Number(t), ROUNDS = Number(k);
const CTX = 512;
const tmp = (): string => fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-split-'));

/** T engines of one thread, the N sequences dealt out as evenly as they go. */
async function split(): Promise<EngineSet> {
  const sizes = Array.from({ length: T }, (_, i) => Math.floor(N / T) + (i < N % T ? 1 : 0));
  const sets = await Promise.all(sizes.map((s) => batchedEngine(model, s, '1', CTX, tmp(), { kv_unified: '0' })));
  return {
    mode: `${T} engines x 1 thread`, agents: sets.flatMap((s) => s.agents),
    pids: () => sets.flatMap((s) => s.pids()),
    stop: async () => { await Promise.all(sets.map((s) => s.stop())); },
  } as EngineSet;
}

const modes: Record<string, () => Promise<EngineSet>> = {
  [`one engine, ${T} threads`]: () => batchedEngine(model, N, String(T), CTX, tmp(), { kv_unified: '0' }),
  [`${T} engines, 1 thread each`]: split,
  'bare -t 1': () => sharedServer(model, N, 1, CTX),
  [`bare -t ${T}`]: () => sharedServer(model, N, T, CTX),
};

const runs: { mode: string; round: number; tokens_per_s: number; tokens_per_cpu_s: number; load_1m: number }[] = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const [mode, start] of Object.entries(modes)) {
    const set = await start();
    try {
      await runLoad(set, Math.ceil(3072 / 64 / N), 64); // warm: model pages, first prompts, V8's compiles
      const load_1m = os.loadavg()[0]!;
      const res = await runLoad(set, R, 64);
      runs.push({ mode, round, tokens_per_s: Math.round(res.tokens_per_s), tokens_per_cpu_s: Math.round(res.tokens_per_cpu_s), load_1m });
      console.error(JSON.stringify(runs[runs.length - 1]));
    } finally { await set.stop(); }
  }
}
const out = { bench: 'engine-split', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, requests: R, threads: T, rounds: ROUNDS, runs, load: os.loadavg() };
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.appendFileSync(path.join(ROOT, 'bench/results/engine-split.jsonl'), JSON.stringify(out) + '\n');
console.log(JSON.stringify(out));
process.exit(0);
