/**
 * The swarm against its limit: N agents through the hub (`swarm up --engine shared`
 * and per-worker embedded) versus a bare `llama-server -np N` driven directly, same model, same load
 * (N concurrent streams, R requests each, T tokens per request, temperature 0), in one run.
 * Run: `npm run build && node dist/bench/swarm-vs-server.js [MODEL] [N] [R]`; writes bench/results/swarm-vs-server.json.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine } from './proc.js';
import { runLoad, sharedServer } from './engine-load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');
const model = process.argv[2] ?? '/tmp/swarm-bench-models/synth-llama-110M-shape-q8_0.gguf';
const n = Number(process.argv[3] ?? 8);
const reqs = Number(process.argv[4] ?? 3);
const TOKENS = 64;
const threads = os.cpus().length;

function swarm(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input, timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Tokens/s of N*R tasks through a running swarm (submit to last result), from the receipts. */
function throughSwarm(engine: 'shared' | 'per-worker') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-'));
  try {
    const up = swarm(['up', '--agents', String(n), '--engine', engine, '--model', model, '--detach', '--json', '--state-dir', dir, '--ready-timeout', '600000']);
    if (up.code !== 0) throw new Error(up.stderr);
    const ready = JSON.parse(up.stdout) as { ready_ms: number };
    const lines = (tag: string, k: number) => Array.from({ length: k }, (_, i) => JSON.stringify({ id: `${tag}-${i}`, prompt: 'Once upon a time', max_tokens: TOKENS, temperature: 0, seed: i })).join('\n');
    swarm(['submit', '--file', '-', '--wait', '--state-dir', dir], lines('warm', n)); // engines warm, like the bare server's warm-up
    const t0 = performance.now();
    const sub = swarm(['submit', '--file', '-', '--wait', '--json', '--state-dir', dir], lines('run', n * reqs));
    const wall = (performance.now() - t0) / 1000;
    const res = JSON.parse(sub.stdout) as { tasks: { state: string; receipt?: { tokens_out?: number; ttft_ms?: number } }[] };
    const tokens = res.tasks.reduce((a, x) => a + (x.receipt?.tokens_out ?? 0), 0);
    return { mode: `swarm ${engine}`, ready_ms: ready.ready_ms, done: res.tasks.filter((x) => x.state === 'done').length, tokens, wall_s: +wall.toFixed(2), tokens_per_s: Math.round(tokens / wall) };
  } finally {
    swarm(['down', '--state-dir', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function bare() {
  const set = await sharedServer(model, n, threads, 2048);
  try {
    await runLoad(set, 1, TOKENS); // warm-up
    const r = await runLoad(set, reqs, TOKENS);
    return { mode: `bare llama-server -np ${n} -t ${threads}`, tokens: r.tokens, wall_s: +r.wall_s.toFixed(2), tokens_per_s: Math.round(r.tokens_per_s) };
  } finally { await set.stop(); }
}

const rows = [await bare(), throughSwarm('shared'), throughSwarm('per-worker')];
const base = rows[0]!.tokens_per_s;
const out = { machine: machine(), date: new Date().toISOString(), load_avg_1m: os.loadavg()[0], model: path.basename(model), agents: n, requests_per_agent: reqs, tokens_per_request: TOKENS,
  rows: rows.map((r) => ({ ...r, vs_bare: +(r.tokens_per_s / base).toFixed(2) })) };
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.writeFileSync(path.join(ROOT, 'bench/results/swarm-vs-server.json'), JSON.stringify(out, null, 2) + '\n');
console.log(JSON.stringify(out, null, 2));
