/**
 * Engine benchmark: for 1, 4, 8 (and 25) agents on stories260K, the 15M shape and the
 * 110M shape, aggregate tokens/s, time to first token p50/p99, total PSS and PSS per agent, for
 * (a) an engine per worker (N llama-server processes, -np 1) and (b) one shared `llama-server -np N`
 * with N concurrent clients, under the same load. Drives the drivers directly (no hub).
 * Run: `npm run build && node dist/bench/engines.js` (env BENCH_AGENTS=1,4,8,25, BENCH_MODELS=260k,15m,110m,
 * BENCH_MODES=per-worker,shared,shared-t1,embedded, BENCH_SHARED_THREADS, BENCH_110M_25=1, BENCH_REQUESTS, BENCH_TOKENS). Writes bench/results/engines.json and prints a table.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findLlamaBinary } from '../drivers/llama-build/index.js';
import { measureMemory, perWorkerEmbedded, perWorkerServers, runLoad, sharedServer, type EngineSet } from './engine-load.js';
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
/** Threads of the shared engine (default: all cores). */
const SHARED_THREADS = Number(process.env.BENCH_SHARED_THREADS ?? CORES);
/** Tokens per row, by model: a bounded load that takes a few seconds (small models are fast). */
const TARGET: Record<string, number> = { '260k': 4096, '15m': 2048, '110m': 1024 };
/** Requests per agent: a bounded load, about the same total work for every N. */
const requestsFor = (key: string, n: number): number =>
  Number(process.env.BENCH_REQUESTS ?? Math.max(1, Math.ceil((TARGET[key] ?? 1024) / (n * TOKENS))));

interface Row {
  model: string; agents: number; mode: string; threads_per_engine: number;
  requests: number; tokens: number; wall_s: number; tokens_per_s: number; ttft_p50_ms: number; ttft_p99_ms: number;
  engine_cpu_s: number; tokens_per_cpu_s: number; loadavg_1m: number; retries: number; errors: number;
  engines: number; total_pss_mb: number; pss_per_agent_mb: number; total_rss_mb: number; model_pss_mb: number; model_rss_mb: number;
  model_file_mb: number; start_s: number;
}

type Mode = 'per-worker' | 'shared' | 'shared-t1' | 'embedded';
// 'shared' (one engine, all cores) is off by default: with 2 threads on this 2-core machine, busy with
// other work, llama.cpp was 5-30x slower than with 1 (its threads spin at barriers).
const MODES = list(process.env.BENCH_MODES, 'per-worker,shared-t1,embedded') as Mode[];

async function one(mode: Mode, key: string, file: string, name: string, n: number): Promise<Row> {
  // The same CPU budget in both modes: all cores in total.
  // The embedded engine runs 1 thread (its default: node-llama-cpp was faster with 1 than 2 here).
  const threads = mode === 'shared' ? SHARED_THREADS : mode === 'shared-t1' || mode === 'embedded' ? 1 : Math.max(1, Math.floor(CORES / n));
  const t0 = performance.now();
  const set: EngineSet = mode === 'shared' || mode === 'shared-t1' ? await sharedServer(file, n, threads, CTX_PER_SLOT)
    : mode === 'embedded' ? await perWorkerEmbedded(file, n, threads, CTX_PER_SLOT) : await perWorkerServers(file, n, threads, CTX_PER_SLOT);
  const start_s = Math.round((performance.now() - t0) / 10) / 100;
  try {
    await runLoad(set, 1, 4); // warm-up: pages in the weights, allocates buffers
    const load = await runLoad(set, requestsFor(key, n), TOKENS);
    const loadavg = os.loadavg()[0]!.toFixed(1);
    const mem = measureMemory(set, file);
    return { model: name, agents: n, mode, threads_per_engine: threads, ...load, ...mem, loadavg_1m: Number(loadavg), model_file_mb: Math.round(fs.statSync(file).size / 1048576 * 10) / 10, start_s };
  } finally {
    await set.stop();
  }
}

function table(rows: Row[]): string {
  const head = ['model', 'N', 'mode', 't', 'tok/s', 'ratio', 'tok/cpu-s', 'ttft p50', 'ttft p99', 'retry/err', 'PSS tot MB', 'PSS/agent', 'model PSS', 'model RSS'];
  const lines = [head];
  for (const r of rows) {
    const pw = rows.find((x) => x.model === r.model && x.agents === r.agents && x.mode === 'per-worker');
    const ratio = pw ? (r.tokens_per_s / pw.tokens_per_s).toFixed(2) : '';
    lines.push([r.model, String(r.agents), r.mode, String(r.threads_per_engine), r.tokens_per_s.toFixed(1), ratio, r.tokens_per_cpu_s.toFixed(1), `${r.ttft_p50_ms}`, `${r.ttft_p99_ms}`, `${r.retries}/${r.errors}`,
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
      // 25 agents on the 110M shape is a long run on 2 cores: only when asked.
      if (key === '110m' && n > 8 && process.env.BENCH_110M_25 !== '1') continue;
      for (const mode of MODES) {
        const r = await one(mode, key, m.file, m.key, n);
        rows.push(r);
        process.stderr.write(`${m.key} N=${n} ${mode}: ${r.tokens_per_s} tok/s, ttft p50 ${r.ttft_p50_ms} ms, PSS ${r.total_pss_mb} MB (model ${r.model_pss_mb} MB of ${r.model_file_mb} MB file)\n`);
      }
    }
  }
  const results = {
    bench: 'engines', date: new Date().toISOString(), machine: machine(),
    note: 'Drivers driven directly (LlamaServerDriver), no hub. per-worker = N llama-server processes with -np 1 and cores/N threads each; ' +
      `shared = one llama-server -np N with ${SHARED_THREADS} threads and N client drivers; shared-t1 = the same with 1 thread; embedded = N embedded-driver engines (node-llama-cpp child processes), one slot and 1 thread each. Each agent: requests x ${TOKENS} tokens, all agents concurrent, after a 4-token warm-up. ` +
      'tok/s counts tokens the engine reports (tokens_predicted); ratio = shared/per-worker tok/s; tok/cpu-s = tokens per CPU second of the engine processes (robust to other load on the machine). PSS from /proc/PID/smaps_rollup; model PSS/RSS = the model file mapping summed over engines.',
    tokens_per_request: TOKENS, ctx_per_slot: CTX_PER_SLOT, total_s: Math.round((performance.now() - t0) / 1000), rows,
  };
  fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'bench/results/engines.json'), JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(`${results.note}\n\n${table(rows)}\n\ntotal ${results.total_s} s; written to bench/results/engines.json\n`);
}

main().catch((err: unknown) => { process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`); process.exitCode = 1; });
