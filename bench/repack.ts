/**
 * The cost of `--no-repack` on a Q4_K_M model (110M shape): on x86 llama.cpp repacks Q4_K weights
 * into a private per-process buffer (faster matmuls, but the pages are no longer shared between
 * engines). This measures tokens/s with and without repacking, for one engine and for 4 engines,
 * and the memory of 4 engines either way; and the alternative that keeps both: one shared engine
 * (-np 4) that repacks once. Run: `npm run build && node dist/bench/repack.js`; writes bench/results/repack.json.
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
const SYNTH = path.resolve(ROOT, '../shared/tools/make-synth-model');
const TMP = path.join(os.tmpdir(), 'swarm-bench-models');
const CORES = os.availableParallelism();
const TOKENS = 64;
const THREADS = Number(process.env.BENCH_THREADS ?? 1);

/** The 110M-shape Q4_K_M model: made at f32 with make-synth-model and quantized with llama-quantize, once. */
function q4Model(): string {
  const q4 = path.join(TMP, 'synth-llama-110M-shape-q4_k_m.gguf');
  if (fs.existsSync(q4)) return q4;
  fs.mkdirSync(TMP, { recursive: true });
  const f32 = path.join(TMP, 'synth-llama-110M-shape-f32.gguf');
  const quantize = findLlamaBinary('llama-quantize');
  if (!quantize) throw new Error('llama-quantize not found: run `swarm engine build`');
  process.stderr.write(`making ${q4}…\n`);
  if (spawnSync(SYNTH, [f32, '768', '12', '12', '2048', 'f32'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] }).status !== 0) throw new Error('make-synth-model failed');
  if (spawnSync(quantize, [f32, q4, 'Q4_K_M', String(CORES)], { stdio: 'ignore' }).status !== 0) throw new Error('llama-quantize failed');
  fs.rmSync(f32);
  return q4;
}

interface Row { case: string; engines: number; threads: number; args: string; tokens_per_s: number; ttft_p50_ms: number; total_pss_mb: number; model_pss_mb: number }

async function measure(label: string, make: () => Promise<EngineSet>, model: string, requests: number, threads: number, args: string): Promise<Row> {
  const set = await make();
  try {
    await runLoad(set, 1, 4);
    const load = await runLoad(set, requests, TOKENS);
    const mem = measureMemory(set, model);
    const row = { case: label, engines: mem.engines, threads, args, tokens_per_s: load.tokens_per_s, ttft_p50_ms: load.ttft_p50_ms, total_pss_mb: mem.total_pss_mb, model_pss_mb: mem.model_pss_mb };
    process.stderr.write(`${JSON.stringify(row)}\n`);
    return row;
  } finally { await set.stop(); }
}

async function main(): Promise<void> {
  const model = q4Model();
  const rows: Row[] = [];
  for (const args of ['', '--no-repack']) {
    const name = args || 'default (repack)';
    // One thread per engine: on this 2-core machine, busy with other work, 2 threads were several times slower.
    rows.push(await measure(`1 engine, ${name}`, () => perWorkerServers(model, 1, THREADS, 512, args), model, 6, THREADS, args));
    rows.push(await measure(`4 engines (-np 1 each), ${name}`, () => perWorkerServers(model, 4, THREADS, 512, args), model, 3, THREADS, args));
    rows.push(await measure(`1 shared engine -np 4, ${name}`, () => sharedServer(model, 4, THREADS, 512, args), model, 3, THREADS, args));
  }
  const results = { bench: 'repack', date: new Date().toISOString(), machine: machine(), model: path.basename(model), model_mb: Math.round(fs.statSync(model).size / 1048576 * 10) / 10, tokens_per_request: TOKENS, rows };
  fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'bench/results/repack.json'), JSON.stringify(results, null, 2) + '\n');
  const w = Math.max(...rows.map((r) => r.case.length));
  process.stdout.write(`${results.model} (${results.model_mb} MB), ${TOKENS} tokens per request\n` +
    `${'case'.padEnd(w)}  tok/s    ttft p50  PSS total MB  model PSS MB\n` +
    rows.map((r) => `${r.case.padEnd(w)}  ${r.tokens_per_s.toFixed(1).padEnd(7)}  ${String(r.ttft_p50_ms).padEnd(8)}  ${r.total_pss_mb.toFixed(1).padEnd(12)}  ${r.model_pss_mb.toFixed(1)}`).join('\n') + '\n');
}

main().catch((err: unknown) => { process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`); process.exitCode = 1; });
