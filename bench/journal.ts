/**
 * Journal benchmarks: what durability costs, and what compaction buys.
 * 1. tasks/s and p99 acknowledgement latency (POST /tasks answered) with `--fsync always` (fsync
 *    before every acknowledgement, one per group commit) against `--fsync interval`: a real hub and
 *    25 echo workers in their own processes, 10,000 tasks in POSTs of 10 from 20 concurrent clients.
 * 2. At 1M journaled tasks (each with a result): compaction time, and restart (open + replay) time
 *    from the uncompacted segment and from the snapshot.
 * Run after a build: `node dist/bench/journal.js [--tasks 10000] [--big 1000000] [--skip-big]`.
 * Writes bench/results/journal.json; the load average is recorded beside the numbers.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TaskStore } from '../hub/index.js';
import { machine, quantile } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');
const arg = (name: string, def: number): number => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : def; };

interface HubFile { pid: number; control: { host: string; port: number }; token?: string }
const hubFile = (dir: string): HubFile | undefined => { try { return JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as HubFile; } catch { return undefined; } };

async function api<T>(dir: string, method: string, p: string, body?: unknown): Promise<{ status: number; json: T }> {
  const h = hubFile(dir)!;
  const r = await fetch(`http://${h.control.host}:${h.control.port}${p}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(h.token ? { authorization: `Bearer ${h.token}` } : {}) },
  });
  return { status: r.status, json: (await r.json()) as T };
}
async function until(cond: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (await cond()) return true; await new Promise((r) => setTimeout(r, 50)); }
  return false;
}
const bg = (args: string[]) => spawn(process.execPath, [CLI, ...args], { stdio: 'ignore', detached: true });
const kill = (pid?: number) => { if (pid) try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ } };
const load = (): string => os.loadavg().map((x) => x.toFixed(2)).join(' ');

async function ackRun(mode: 'always' | 'interval', tasks: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-journal-'));
  const hub = bg(['hub', '--state-dir', dir, '--fsync', mode]);
  let workers;
  try {
    await until(() => hubFile(dir)?.pid === hub.pid, 30_000);
    workers = bg(['worker', '--count', '25', '--state-dir', dir, '--driver', 'echo']);
    await until(async () => (await api<{ workers: unknown[] }>(dir, 'GET', '/status')).json.workers.length === 25, 60_000);
    const loadBefore = load();
    const lat: number[] = [];
    const ids: string[] = [];
    let next = 0;
    const t0 = performance.now();
    const client = async (): Promise<void> => {
      while (next < tasks) {
        const from = next;
        next += 10;
        const batch = Array.from({ length: Math.min(10, tasks - from) }, (_, i) => ({ id: `${mode}-${from + i}`, prompt: `task ${from + i}` }));
        const s = performance.now();
        const r = await api<{ accepted: { id: string }[] }>(dir, 'POST', '/tasks', { tasks: batch });
        lat.push(performance.now() - s);
        if (r.status !== 202) throw new Error(`submit answered ${r.status}`);
        for (const a of r.json.accepted) ids.push(a.id);
      }
    };
    await Promise.all(Array.from({ length: 20 }, client));
    const submitted = performance.now();
    const w = await api<{ complete: boolean }>(dir, 'POST', '/wait', { ids, timeout_ms: 300_000 });
    const ms = performance.now() - t0;
    return {
      mode, tasks, complete: w.json.complete, tasks_per_s: Math.round(tasks / (ms / 1000)), submit_ms: Math.round(submitted - t0),
      ack_p50_ms: +quantile(lat, 0.5).toFixed(2), ack_p99_ms: +quantile(lat, 0.99).toFixed(2), posts: lat.length,
      load_before: loadBefore, load_after: load(),
    };
  } finally {
    kill(workers?.pid); kill(hub.pid);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function bigRun(n: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-journal-big-'));
  const opts = { maxDepth: n + 1, leaseMs: 600_000, defaultMaxAttempts: 3 };
  // No compaction while building: the point is to measure one at 1M.
  const jopts = { fsyncMs: 0, compactBytes: 2 ** 40 };
  try {
    const s = await TaskStore.open(dir, opts, jopts);
    const w = { id: 'w', caps: [] as string[] };
    const B = 10_000;
    for (let i = 0; i < n; i += B) {
      await s.submitMany(Array.from({ length: Math.min(B, n - i) }, (_, k) => ({ id: `t-${i + k}`, prompt: `prompt number ${i + k}` })));
      const done: Promise<unknown>[] = [];
      for (let k = 0; k < B && i + k < n; k++) { const r = s.lease(w)!; done.push(s.complete(r.id, { text: `result ${r.id}`, worker: 'w', attempt: 1 })); }
      await Promise.all(done);
    }
    const segmentBytes = fs.statSync(path.join(dir, 'journal.ndjson')).size;
    await s.close();
    // CPU time beside wall time: on shared cores the wall time mostly measures the other jobs.
    const cpu = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
    let t0 = performance.now();
    let c0 = cpu();
    const s1 = await TaskStore.open(dir, opts, jopts);
    const restartSegmentMs = performance.now() - t0;
    const restartSegmentCpu = cpu() - c0;
    const loadAt = load();
    t0 = performance.now();
    c0 = cpu();
    await s1.compact();
    const compactMs = performance.now() - t0;
    const compactCpu = cpu() - c0;
    await s1.close();
    const snapshotBytes = fs.statSync(path.join(dir, 'snapshot.ndjson')).size;
    t0 = performance.now();
    c0 = cpu();
    const s2 = await TaskStore.open(dir, opts, jopts);
    const restartSnapshotMs = performance.now() - t0;
    const restartSnapshotCpu = cpu() - c0;
    const c = s2.queue.counts();
    await s2.close();
    return {
      tasks: n, done: c.done, segment_mb: +(segmentBytes / 2 ** 20).toFixed(1), snapshot_mb: +(snapshotBytes / 2 ** 20).toFixed(1),
      restart_from_segment_ms: Math.round(restartSegmentMs), compaction_ms: Math.round(compactMs), restart_from_snapshot_ms: Math.round(restartSnapshotMs),
      restart_from_segment_cpu_ms: Math.round(restartSegmentCpu), compaction_cpu_ms: Math.round(compactCpu), restart_from_snapshot_cpu_ms: Math.round(restartSnapshotCpu),
      load: loadAt, load_end: load(),
    };
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

const tasks = arg('--tasks', 10_000);
const file = path.join(ROOT, 'bench/results/journal.json');
const command = `node dist/bench/journal.js ${process.argv.slice(2).join(' ')}`.trim();
// Each part replaces its own numbers in the last run's file (the two parts take long; run them apart).
const out: Record<string, unknown> = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown> : {};
out.machine = machine();
if (!process.argv.includes('--only-big')) {
  out.ack = { at: new Date().toISOString(), command, always: await ackRun('always', tasks), interval: await ackRun('interval', tasks) };
  console.log(out.ack);
}
if (!process.argv.includes('--skip-big')) { out.big = { at: new Date().toISOString(), command, ...(await bigRun(arg('--big', 1_000_000))) }; console.log(out.big); }
fs.mkdirSync(path.dirname(file), { recursive: true });
fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
console.log(JSON.stringify(out, null, 2));
process.exit(0);
