/**
 * Hub CPU per task before and after hub restarts, in one run: `swarm up --agents 25 --procs 5 --driver echo`
 * (failover on), echo prompts of 100 B-16 KB; per phase a warm-up of --warm tasks, then --measure tasks in
 * a window read from /proc (the hub's utime+stime, the workers' too); then the hub is killed (`kill -9`)
 * and `swarm up` runs again on the same state dir, --restarts times. Beside each window: the load average,
 * the hub's user/system split, bytes and system calls per task, RSS and descriptors, each worker process's
 * CPU per task, the agents' replica sizes, and the replication counters over the window (holders fallen
 * behind, STATE frames, the holders' feeds: a whole sync still running shows `syncing`).
 *
 * Run: `npm run build && node dist/bench/restart-cpu.js [--warm 25000] [--measure 40000] [--restarts 2]
 *   [--retain 24h,20000] [--graceful]` (--graceful: `swarm down` then `up` instead of a kill).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, arg } from './args.js';
import { agents, api, hubFile } from './failover-procs.js';
import { cpuSeconds, rssMb } from './proc.js';

const WARM = Number(arg('warm', '25000'));
const MEASURE = Number(arg('measure', '40000'));
const RESTARTS = Number(arg('restarts', '2'));
const RETAIN = arg('retain', '24h,20000');
const GRACEFUL = process.argv.includes('--graceful');
/** Seconds of `perf record` on the hub at the start of each window (needs SWARM_NODE_ARGS=--perf-basic-prof for names). */
const PERF_S = Number(arg('perf', '0'));
const BATCH = 500, WINDOW = 4;

const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}
/** The soak bench's prompts: 100 B to 16 KB, log-uniform. */
function prompt(i: number): string {
  const r = rng(i * 2654435761);
  const size = Math.floor(100 * Math.pow(16384 / 100, r()));
  let s = `soak ${i}`;
  while (s.length < size) s += ' ' + Math.floor(r() * 2 ** 52).toString(36).padEnd(11, 'z').repeat(4).slice(0, 40);
  return s.slice(0, size);
}

function up(dir: string): number {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [CLI, 'up', '--agents', '25', '--procs', '5', '--driver', 'echo', '--detach', '--json', '--ready-timeout', '120000', '--state-dir', dir, '--retain', RETAIN], { encoding: 'utf8', timeout: 150_000 });
  if (r.status !== 0) throw new Error(`up failed: ${r.stdout}${r.stderr}`);
  return Date.now() - t0;
}
function workerPids(dir: string): number[] {
  const d = path.join(dir, 'pids');
  return [...new Set(fs.readdirSync(d).map((f) => { const t = fs.readFileSync(path.join(d, f), 'utf8').trim(); return t.startsWith('{') ? (JSON.parse(t) as { pid: number }).pid : Number(t); }))];
}
interface St { hub: { mode: string }; failover: Record<string, unknown> & { holders: string[]; workers: { mode: string }[] } }
/** User and system CPU seconds of a process. */
function userSys(pid: number): number[] {
  const t = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = t.slice(t.lastIndexOf(')') + 2).split(' ');
  return [Number(f[11]) / 100, Number(f[12]) / 100];
}
const safe = (f: () => number) => { try { return f(); } catch { return 0; } };
const fds = (pid: number) => safe(() => fs.readdirSync(`/proc/${pid}/fd`).length);
/** The hub's bytes and system calls in and out and its voluntary context switches (wakes), from /proc. */
function io(pid: number): Record<string, number> {
  const t = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  const n = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(t)?.[1] ?? 0);
  const wakes = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return { rchar: n('rchar'), wchar: n('wchar'), syscr: n('syscr'), syscw: n('syscw'), wakes };
}

async function run(dir: string, from: number, n: number): Promise<void> {
  let next = from;
  const end = from + n;
  const batch = async (a: number, k: number) => {
    const tasks = Array.from({ length: k }, (_, j) => ({ id: `soak-${a + j}`, prompt: prompt(a + j) }));
    for (;;) { const r = await api<{ error?: unknown }>(dir, 'POST', '/tasks', { tasks }); if (r && !r.error) break; await new Promise((s) => setTimeout(s, 250)); }
    const ids = tasks.map((t) => t.id);
    for (;;) { const r = await api<{ complete?: boolean }>(dir, 'POST', '/wait', { ids, timeout_ms: 20_000 }); if (r?.complete) return; }
  };
  const inflight = new Set<Promise<void>>();
  while (next < end || inflight.size) {
    while (next < end && inflight.size < WINDOW) { const k = Math.min(BATCH, end - next); const p = batch(next, k).finally(() => inflight.delete(p)); inflight.add(p); next += k; }
    await Promise.race(inflight);
  }
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-restart-cpu-'));
  log(`up in ${up(dir)} ms (${dir})`);
  let next = 0;
  const rows: Record<string, unknown>[] = [];
  for (let phase = 0; phase <= RESTARTS; phase++) {
    await run(dir, next, WARM); next += WARM;
    const hub = hubFile(dir)!.pid;
    const workers = workerPids(dir);
    const load0 = os.loadavg()[0]!;
    const perfOut = path.join(os.tmpdir(), `restart-cpu-${process.pid}-${phase}.perf`);
    const perf = PERF_S ? spawn('perf', ['record', '-F', '499', '-g', '-p', String(hub), '-o', perfOut, '--', 'sleep', String(PERF_S)], { stdio: 'ignore' }) : undefined;
    if (perf) log(`perf record of the hub for ${PERF_S} s: ${perfOut}`);
    const io0 = io(hub);
    const st0 = await api<St>(dir, 'GET', '/status');
    const ut0 = userSys(hub);
    const c0 = cpuSeconds(hub), w0 = workers.reduce((a, p) => a + safe(() => cpuSeconds(p)), 0), t0 = Date.now();
    const wEach = workers.map((p) => safe(() => cpuSeconds(p)));
    await run(dir, next, MEASURE); next += MEASURE;
    const io1 = io(hub);
    const perTask = Object.fromEntries(Object.keys(io0).map((k) => [k, +((io1[k]! - io0[k]!) / MEASURE).toFixed(k.endsWith('char') ? 0 : 2)]));
    const c1 = cpuSeconds(hub), w1 = workers.reduce((a, p) => a + safe(() => cpuSeconds(p)), 0);
    const perProc = workers.map((p, i) => Math.round(((safe(() => cpuSeconds(p)) - wEach[i]!) * 1e6) / MEASURE));
    const reps = agents(dir).map((a) => a.replica.size);
    const ut1 = userSys(hub);
    const s = await api<St>(dir, 'GET', '/status');
    const fo = (k: string) => (s?.failover[k] as number) - (st0?.failover[k] as number);
    const row = {
      phase: phase === 0 ? 'fresh' : `after restart ${phase}`, hub_us_per_task: Math.round(((c1 - c0) * 1e6) / MEASURE),
      workers_us_per_task: Math.round(((w1 - w0) * 1e6) / MEASURE), tasks_per_s: Math.round(MEASURE / ((Date.now() - t0) / 1000)),
      load: [load0, os.loadavg()[0]].map((x) => +x!.toFixed(1)), hub_rss_mb: Math.round(rssMb(hub)), hub_fds: fds(hub), holders: s?.failover.holders.length,
      hub_per_task: perTask, hub_user_sys_us_per_task: [0, 1].map((i) => Math.round(((ut1[i]! - ut0[i]!) * 1e6) / MEASURE)),
      worker_procs_us_per_task: perProc, replica_sizes: reps.join(' '), holder_ids: s?.failover.holders.join(' '),
      feeds_before: st0?.failover.feeds, feeds_after: s?.failover.feeds,
      hub_mode: s?.hub.mode, modes: s?.failover.workers.map((w) => w.mode).filter((m) => m !== 'star').length,
      window: Object.fromEntries(['deltas', 'stateFrames', 'fullSyncs', 'resumedSyncs', 'behindResumed', 'behindRestarted', 'haveSyncs', 'haveHeld', 'haveSent', 'handbacks', 'offers', 'entries'].map((k) => [k, fo(k)])),
    };
    rows.push(row);
    log(JSON.stringify(row));
    if (phase === RESTARTS) break;
    if (GRACEFUL) spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { encoding: 'utf8', timeout: 60_000 });
    else process.kill(hub, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 100));
    log(`hub ${GRACEFUL ? 'stopped' : 'killed'}; up again in ${up(dir)} ms`);
  }
  spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { encoding: 'utf8', timeout: 60_000 });
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify({ date: new Date().toISOString(), command: `node dist/bench/restart-cpu.js ${process.argv.slice(2).join(' ')}`.trim(), rows }));
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`); process.exit(1); });
