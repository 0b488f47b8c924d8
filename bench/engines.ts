/**
 * Engine benchmark (issue 3): for 1, 4, 8 (and 25) agents on stories260K, the 15M shape and the
 * 110M shape, aggregate tokens/s, time to first token p50/p99, total PSS and PSS per agent, for
 * (a) an engine per worker (N llama-server processes, -np 1) and (b) one shared `llama-server -np N`
 * with N concurrent clients, under the same load. Drives the drivers directly (no hub).
 * Run: `npm run build && node dist/bench/engines.js` (env BENCH_AGENTS=1,4,8,25, BENCH_MODELS=260k,15m,110m,
 * BENCH_REQUESTS, BENCH_TOKENS). Writes bench/results/engines.json and prints a table.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findLlamaBinary } from '../drivers/llama-build/index.js';
import { measureMemory, perWorkerServers, runLoad, sharedServer, type EngineSet } from './engine-load.js';
import { machine } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MODELS_DIR = process.env.SWARM_TEST_MODELS ?? path.resolve(ROOT, '../shared/models');
const SYNTH = path.resolve(ROOT, '../shared/tools/make-synth-model');
const TMP = path.join(os.tmpdir(), 'swarm-bench-models');
const CORES = os.availableParallelism();

/** A model file: shipped, or made with make-synth-model into the temp dir once. */
function model(key: string): { key: string; file: string } {
  if (key === '260k') return { key: 'stories260K', file: path.join(MODELS_DIR, 'stories260K.gguf') };
  if (key === '15m') return { key: '15M shape q8_0', file: path.join(MODELS_DIR, 'synth-llama-15M-shape-q8_0.gguf') };
  if (key === '110m') {
    const file = path.join(TMP, 'synth-llama-110M-shape-q8_0.gguf');
    if (!fs.existsSync(file)) {
      fs.mkdirSync(TMP, { recursive: true });
      process.stderr.write(`making ${file} with make-synth-model…\n`);
      const r = spawnSync(SYNTH, [file, '768', '12', '12', '2048', 'q8_0'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
      if (r.status !== 0) throw new Error('make-synth-model failed');
    }
    return { key: '110M shape q8_0', file };
  }
  throw new Error(`unknown model ${key}`);
}

const list = (v: string | undefined, def: string): string[] => (v ?? def).split(',').map((s) => s.trim()).filter(Boolean);
const agentsList = list(process.env.BENCH_AGENTS, '1,4,8,25').map(Number);
const modelKeys = list(process.env.BENCH_MODELS, '260k,15m,110m');
const TOKENS = Number(process.env.BENCH_TOKENS ?? 64);
const CTX_PER_SLOT = 512;
/** Requests per agent: a bounded load, similar total work per row. */
const requestsFor = (n: number): number => Number(process.env.BENCH_REQUESTS ?? (n >= 25 ? 1 : n >= 8 ? 2 : n >= 4 ? 3 : 6));

interface Row {
  model: string; agents: number; mode: string; threads_per_engine: number;
  requests: number; tokens: number; wall_s: number; tokens_per_s: number; ttft_p50_ms: number; ttft_p99_ms: number;
  engines: number; total_pss_mb: number; pss_per_agent_mb: number; total_rss_mb: number; model_pss_mb: number; model_rss_mb: number;
  model_file_mb: number; start_s: number;
}

async function one(mode: 'per-worker' | 'shared', file: string, name: string, n: number): Promise<Row> {
  // The same CPU budget in both modes: all cores in total.
  const threads = mode === 'shared' ? CORES : Math.max(1, Math.floor(CORES / n));
  const t0 = performance.now();
  const set: EngineSet = mode === 'shared' ? await sharedServer(file, n, threads, CTX_PER_SLOT) : await perWorkerServers(file, n, threads, CTX_PER_SLOT);
  const start_s = Math.round((performance.now() - t0) / 10) / 100;
  try {
    await runLoad(set, 1, 4); // warm-up: pages in the weights, allocates buffers
    const load = await runLoad(set, requestsFor(n), TOKENS);
    const mem = measureMemory(set, file);
    return { model: name, agents: n, mode, threads_per_engine: threads, ...load, ...mem, model_file_mb: Math.round(fs.statSync(file).size / 1048576 * 10) / 10, start_s };
  } finally {
    await set.stop();
  }
}

function table(rows: Row[]): string {
  const head = ['model', 'N', 'mode', 'tok/s', 'ratio', 'ttft p50', 'ttft p99', 'PSS tot MB', 'PSS/agent', 'model PSS', 'model RSS'];
  const lines = [head];
  for (const r of rows) {
    const pw = rows.find((x) => x.model === r.model && x.agents === r.agents && x.mode === 'per-worker');
    const ratio = pw ? (r.tokens_per_s / pw.tokens_per_s).toFixed(2) : '';
    lines.push([r.model, String(r.agents), r.mode, r.tokens_per_s.toFixed(1), ratio, `${r.ttft_p50_ms}`, `${r.ttft_p99_ms}`,
      r.total_pss_mb.toFixed(1), r.pss_per_agent_mb.toFixed(1), r.model_pss_mb.toFixed(1), r.model_rss_mb.toFixed(1)]);
  }
  const w = head.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  return lines.map((l) => l.map((c, i) => c.padEnd(w[i]!)).join('  ')).join('\n');
}

async function main(): Promise<void> {
  if (!findLlamaBinary('llama-server')) throw new Error('llama-server not found: run `swarm engine build` first');
  const rows: Row[] = [];
  const t0 = performance.now();
  for (const key of modelKeys) {
    const m = model(key);
    for (const n of agentsList) {
      for (const mode of ['per-worker', 'shared'] as const) {
        const r = await one(mode, m.file, m.key, n);
        rows.push(r);
        process.stderr.write(`${m.key} N=${n} ${mode}: ${r.tokens_per_s} tok/s, ttft p50 ${r.ttft_p50_ms} ms, PSS ${r.total_pss_mb} MB (model ${r.model_pss_mb} MB of ${r.model_file_mb} MB file)\n`);
      }
    }
  }
  const results = {
    bench: 'engines', date: new Date().toISOString(), machine: machine(),
    note: 'Drivers driven directly (LlamaServerDriver), no hub. per-worker = N llama-server processes with -np 1 and cores/N threads each; ' +
      `shared = one llama-server -np N with ${CORES} threads and N client drivers. Each agent: requests x ${TOKENS} tokens, all agents concurrent, after a 4-token warm-up. ` +
      'tok/s counts tokens the engine reports (tokens_predicted). PSS from /proc/PID/smaps_rollup; model PSS/RSS = the model file mapping summed over engines.',
    tokens_per_request: TOKENS, ctx_per_slot: CTX_PER_SLOT, total_s: Math.round((performance.now() - t0) / 1000), rows,
  };
  fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'bench/results/engines.json'), JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(`${results.note}\n\n${table(rows)}\n\ntotal ${results.total_s} s; written to bench/results/engines.json\n`);
}

main().catch((err: unknown) => { process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`); process.exitCode = 1; });
