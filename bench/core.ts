/**
 * Core benchmarks: throughput, dispatch latency, 1,000 idle
 * connections, `swarm up` readiness and worker RSS. Run: `npm run bench -- core` (after a build).
 * Prints the results and appends them as one line to bench/results/core.jsonl.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSeconds, machine, rssMb } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');

interface HubFile { pid: number; control: { host: string; port: number }; token?: string }

function hubFile(dir: string): HubFile | undefined {
  try { return JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as HubFile; } catch { return undefined; }
}
async function api<T>(dir: string, method: string, p: string, body?: unknown): Promise<T> {
  const h = hubFile(dir)!;
  const r = await fetch(`http://${h.control.host}:${h.control.port}${p}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(h.token ? { authorization: `Bearer ${h.token}` } : {}) },
  });
  return (await r.json()) as T;
}
async function until(cond: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (await cond()) return true; await new Promise((r) => setTimeout(r, 20)); }
  return false;
}
function bg(args: string[]) {
  return spawn(process.execPath, [CLI, ...args], { stdio: 'ignore', detached: true });
}
function killTree(pid?: number) { if (pid) try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ } }

/** 10,000 tiny tasks over 25 echo workers in their own process, journal on. */
async function throughput(tasks = 10_000, workers = 25) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-'));
  const hub = bg(['hub', '--state-dir', dir]);
  await until(() => hubFile(dir)?.pid === hub.pid, 10_000);
  const w = bg(['worker', '--count', String(workers), '--state-dir', dir, '--driver', 'echo']);
  try {
    await until(async () => (await api<{ workers: unknown[] }>(dir, 'GET', '/status')).workers.length === workers, 20_000);
    // warm-up
    const warm = await api<{ accepted: { id: string }[] }>(dir, 'POST', '/tasks', { tasks: Array.from({ length: 1000 }, (_, i) => ({ prompt: `w${i}` })) });
    await api(dir, 'POST', '/wait', { ids: warm.accepted.map((a) => a.id) });
    const cpu0 = cpuSeconds(hub.pid!);
    const t0 = performance.now();
    const acc = await api<{ accepted: { id: string }[] }>(dir, 'POST', '/tasks', { tasks: Array.from({ length: tasks }, (_, i) => ({ prompt: `task ${i}` })) });
    const accepted = performance.now();
    const waited = await api<{ complete: boolean; tasks: { state: string }[] }>(dir, 'POST', '/wait', { ids: acc.accepted.map((a) => a.id), timeout_ms: 120_000 });
    const ms = performance.now() - t0;
    const status = await api<{ metrics: { dispatch_p50_ms: number; dispatch_p99_ms: number } }>(dir, 'GET', '/status');
    return {
      tasks, workers, done: waited.tasks.filter((x) => x.state === 'done').length,
      wall_ms: Math.round(ms), tasks_per_s: Math.round(tasks / (ms / 1000)), submit_ms: Math.round(accepted - t0),
      dispatch_p50_ms: status.metrics.dispatch_p50_ms, dispatch_p99_ms: status.metrics.dispatch_p99_ms,
      hub_cpu_s: +(cpuSeconds(hub.pid!) - cpu0).toFixed(2), hub_rss_mb: +rssMb(hub.pid!).toFixed(1),
      worker_process_rss_mb: +rssMb(w.pid!).toFixed(1),
    };
  } finally { killTree(w.pid); killTree(hub.pid); fs.rmSync(dir, { recursive: true, force: true }); }
}

/** 1,000 idle worker connections heartbeating every 2 s: hub CPU share and RSS. */
async function idleConnections(n = 1000, seconds = 20) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-'));
  const hub = bg(['hub', '--state-dir', dir, '--no-journal']);
  await until(() => hubFile(dir)?.pid === hub.pid, 10_000);
  const w = bg(['worker', '--count', String(n), '--state-dir', dir, '--driver', 'echo']);
  try {
    const ok = await until(async () => (await api<{ workers: unknown[] }>(dir, 'GET', '/status')).workers.length === n, 60_000);
    await new Promise((r) => setTimeout(r, 3000));
    const c0 = cpuSeconds(hub.pid!);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpu = cpuSeconds(hub.pid!) - c0;
    const connected = (await api<{ workers: unknown[] }>(dir, 'GET', '/status')).workers.length;
    return { connections: n, all_connected: ok, still_connected: connected, window_s: seconds, hub_cpu_pct_of_one_core: +((cpu / seconds) * 100).toFixed(2), hub_rss_mb: +rssMb(hub.pid!).toFixed(1), worker_process_rss_mb: +rssMb(w.pid!).toFixed(1) };
  } finally { killTree(w.pid); killTree(hub.pid); fs.rmSync(dir, { recursive: true, force: true }); }
}

/** `swarm up --agents 25 --driver echo --detach`: time to ready, and each worker process's RSS. */
async function upReady(agents = 25) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-'));
  try {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [CLI, 'up', '--agents', String(agents), '--driver', 'echo', '--detach', '--json', '--state-dir', dir], { encoding: 'utf8' });
    const wall = performance.now() - t0;
    const summary = JSON.parse(r.stdout) as { ready_ms: number; hub_pid: number };
    // A pid file holds {pid, start, cmd} (hub/proc-id.ts); an older one, the bare pid.
    const pids = fs.readdirSync(path.join(dir, 'pids')).map((f) => {
      const txt = fs.readFileSync(path.join(dir, 'pids', f), 'utf8').trim();
      return txt.startsWith('{') ? (JSON.parse(txt) as { pid: number }).pid : Number(txt);
    });
    // CPU spent to get there: on 2 shared cores the wall time follows the load average, this does less.
    const cpu = pids.reduce((a, p) => a + cpuSeconds(p), 0) + cpuSeconds(summary.hub_pid);
    await new Promise((res) => setTimeout(res, 1000));
    const rss = pids.map(rssMb);
    return {
      agents, ready_ms: summary.ready_ms, command_wall_ms: Math.round(wall), load_avg_1m: +os.loadavg()[0]!.toFixed(1),
      hub_and_workers_cpu_s: +cpu.toFixed(2),
      worker_rss_mb_max: +Math.max(...rss).toFixed(1), worker_rss_mb_mean: +(rss.reduce((a, b) => a + b, 0) / rss.length).toFixed(1),
    };
  } finally {
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const results = {
  machine: machine(), date: new Date().toISOString(),
  up_ready: await upReady(),
  throughput: await throughput(),
  idle_1000: await idleConnections(),
};
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.appendFileSync(path.join(ROOT, 'bench/results/core.jsonl'), JSON.stringify(results) + '\n');
console.log(JSON.stringify(results, null, 2));
