/**
 * Process wake-ups per generated token, through the whole swarm: `swarm up --agents N` on the batched
 * engine, then TASKS tasks of 64 tokens, once with nobody watching and once with a dashboard open
 * (its event stream read by this bench: the hub then asks workers for partial answers). A wake-up is
 * a voluntary context switch of a process's main thread (/proc/PID/task/PID/status), summed
 * over the hub and the worker processes, and counted for the engine apart (its main thread hands
 * text out; llama.cpp's own threads are not counted). Tokens from the hub's `tokens_out`.
 * Run: `npm run build && node dist/bench/engine-wakeups.js [MODEL] [AGENTS] [TASKS]`;
 * appends to bench/results/engine-wakeups.jsonl.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');
const [model = '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', n = '8', tasks = '48'] = process.argv.slice(2);

function swarm(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Wake-ups of a process's main thread: its voluntary context switches (it slept, waiting for input
 * or a timer, and was woken). Preemptions (nonvoluntary) are not counted: they measure the load.
 */
function switches(pid: number): number {
  try {
    const s = fs.readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
    return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(s)?.[1] ?? 0);
  } catch { return 0; }
}

interface Status { hub: { pid: number }; workers: { pid?: number }[]; engine?: { pid?: number }; metrics: { tokens_out: number } }

async function measure(state: string, watch: boolean): Promise<Record<string, unknown>> {
  const st = JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout) as Status;
  const hubFile = JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { control: { host: string; port: number }; token?: string };
  const workers = [...new Set(st.workers.flatMap((w) => (w.pid ? [w.pid] : [])))];
  const engines = fs.readdirSync(path.join(state, 'engines')).filter((f) => f.endsWith('.pid')).map((f) => Number(fs.readFileSync(path.join(state, 'engines', f), 'utf8')));
  let feed: AbortController | undefined;
  if (watch) {
    feed = new AbortController();
    const res = await fetch(`http://${hubFile.control.host}:${hubFile.control.port}/dashboard/events`, { headers: { authorization: `Bearer ${hubFile.token}` }, signal: feed.signal });
    void (async () => { try { for await (const _ of res.body!) { /* read, as a browser does */ } } catch { /* closed */ } })();
    await new Promise((r) => setTimeout(r, 300));
  }
  const file = path.join(state, `tasks-${watch}.jsonl`);
  fs.writeFileSync(file, Array.from({ length: Number(tasks) }, (_, i) => JSON.stringify({ id: `w${watch ? 1 : 0}-${i}`, prompt: `Once upon a time, story ${i}`, max_tokens: 64 })).join('\n') + '\n');
  const sum = (pids: number[]): number => pids.reduce((a, p) => a + switches(p), 0);
  // The idle rate (heartbeats, timers), to tell what the tokens cost from what time costs.
  const i0 = { hub: switches(st.hub.pid), workers: sum(workers) };
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const idle = { hub: (switches(st.hub.pid) - i0.hub) / (IDLE_MS / 1000), workers: (sum(workers) - i0.workers) / (IDLE_MS / 1000) };
  const before = { hub: switches(st.hub.pid), workers: sum(workers), engine: sum(engines), tokens: st.metrics.tokens_out };
  const t0 = performance.now();
  const load0 = os.loadavg()[0];
  const sub = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  if (sub.code !== 0) throw new Error(`submit failed: ${sub.stderr}`);
  const wall = (performance.now() - t0) / 1000;
  const after = JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout) as Status;
  const tokens = after.metrics.tokens_out - before.tokens;
  const d = { hub: switches(st.hub.pid) - before.hub, workers: sum(workers) - before.workers, engine: sum(engines) - before.engine };
  feed?.abort();
  const per = (x: number): number => Math.round(x / tokens * 1000) / 1000;
  return {
    watching: watch, tokens, wall_s: Math.round(wall * 10) / 10, load_avg: [load0, os.loadavg()[0]], worker_processes: workers.length,
    wakeups: d, per_token: { hub: per(d.hub), workers: per(d.workers), hub_and_workers: per(d.hub + d.workers), engine_main: per(d.engine) },
    idle_per_s: { hub: Math.round(idle.hub * 10) / 10, workers: Math.round(idle.workers * 10) / 10 },
    per_token_beyond_idle: { hub: per(d.hub - idle.hub * wall), workers: per(d.workers - idle.workers * wall), hub_and_workers: per(d.hub + d.workers - (idle.hub + idle.workers) * wall) },
  };
}

const IDLE_MS = 5000;
const state = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-wake-'));
const up = swarm(['up', '--agents', n, '--model', model, '--detach', '--json', '--state-dir', state]);
if (up.code !== 0) throw new Error(`up failed: ${up.stderr}`);
try {
  // Warm: the engine's first prompts, the workers' first tasks.
  const warm = path.join(state, 'warm.jsonl');
  fs.writeFileSync(warm, Array.from({ length: Number(n) }, (_, i) => JSON.stringify({ id: `warm-${i}`, prompt: 'Hello', max_tokens: 8 })).join('\n') + '\n');
  swarm(['submit', '--file', warm, '--wait', '--state-dir', state]);
  const quiet = await measure(state, false);
  const watched = await measure(state, true);
  const out = { bench: 'engine-wakeups', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: Number(n), tasks: Number(tasks), runs: [quiet, watched] };
  fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  fs.appendFileSync(path.join(ROOT, 'bench/results/engine-wakeups.jsonl'), JSON.stringify(out) + '\n');
  console.log(JSON.stringify(out, null, 2));
} finally {
  swarm(['down', '--state-dir', state]);
  fs.rmSync(state, { recursive: true, force: true });
}
