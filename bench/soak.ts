/**
 * Soak: many echo tasks through `swarm up --agents 25 --driver echo --detach` (failover on), prompts
 * from 100 B to 16 KB (log-uniform, derived from the task's number so the expected answer can be
 * recomputed), with faults at fixed marks of the run:
 * - worker-process kills (SIGKILL of a process that holds no replica; its supervisor respawns it),
 * - hub kills (SIGKILL of the hub, then `swarm up` again on the same state dir),
 * - a replica holder's process killed late in the run (respawned; a new full sync).
 * Every restart's time to ready is measured: `swarm up`'s wall time and its `ready_ms` for the hub,
 * and for a worker process the time until the hub again has 25 workers (and 3 holders) without it.
 * Sampled every 2 s: the hub's and the holders' RSS (/proc/PID/status), the hot state's bytes
 * (journal + snapshot), the archive's (<state>/results). RSS is reported at the 20% and 100% marks
 * (fractions of the tasks done when the load ended; the 100% sample is taken as the last batch
 * finishes, on the running swarm, before any trailing fault or the stop) and as the means of the
 * samples at 15-25% and 90-100%. CPU per task is the hub's utime+stime
 * (/proc/PID/stat) over a window near the start and one near the end, each within one hub's life.
 * At the end the swarm is stopped and every acknowledged id is checked in the archive and the hot
 * state: lost (no result), duplicated (two different results recorded: it ran twice), changed (text
 * differs); the same result recorded twice (archived twice, or archived and hot again) is counted apart.
 *
 * Run: `npm run build && node dist/bench/soak.js [--tasks 1000000] [--retain 24h,20000] [--procs 5]
 *   [--batch 500] [--window 4] [--max-min 600] [--json] [--out bench/results/soak.jsonl] [--keep] [--no-memstat]
 *   [--hub-prof DIR] [--archive-max off] [--hub-limit render|MiB]`.
 * With --hub-limit the hub's process (only it) runs inside a cgroup v1 memory limit (bench/hub-cgroup.ts;
 * root): `render` is the limit deploy/render/hub-mem.ts gives the hub at the run's horizon. The row then
 * has `hub_cgroup`: the limit, the group's peak charge (anonymous memory and page cache), how often it hit
 * the limit and whether the kernel OOM-killed the hub; each sample has the group's charge.
 * Unless --no-memstat, every process of the swarm loads bench/memstat-hook.ts: the holders' heap used,
 * heap total, external bytes and RSS outside V8 are sampled beside their RSS (`holders_mem`), and the
 * hubs' event-loop delay and GC pauses per 2 s sample while the load runs are summed up (`hub_loop`).
 * Appends one dated row to --out (default bench/results/soak.jsonl).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { ROOT, CLI, arg, flag, checkArgs } from './args.js';
import { api, hubFile } from './failover-procs.js';
import { cpuSeconds, machine, rssMb } from './proc.js';
import { TaskStore } from '../hub/store.js';
import { parseRetain } from '../hub/retention.js';
import { soakPrompt } from './soak-prompt.js';
import { HubCgroup, type CgroupUse } from './hub-cgroup.js';
import { hubMem as renderedHubMem } from '../deploy/render/hub-mem.js';

const TASKS = Number(arg('tasks', '1000000', 'tasks to submit'));
const RETAIN = arg('retain', '', 'swarm up --retain (AGE,COUNT,BYTES; default: the swarm\'s)');
/**
 * The archive's bound: off by default, so that every acknowledged task can be checked. With a bound
 * (the swarm's default is 2 GiB, which a soak passes at about 300,000 tasks) the oldest archive files
 * go, and their tasks count as lost: the checker cannot tell them from tasks lost otherwise.
 */
const ARCHIVE_MAX = arg('archive-max', 'off', 'swarm up --archive-max (off: keep every result, so that lost means lost)');
const PROCS = arg('procs', '5', 'worker processes for the 25 agents');
const BATCH = Number(arg('batch', '500', 'tasks per POST /tasks'));
const WINDOW = Number(arg('window', '4', 'batches in flight at once'));
/** The whole run's bound in minutes: past it the bench stops submitting and checks what it has. */
const MAX_MIN = Number(arg('max-min', '600', 'stop submitting after this many minutes and check what ran'));
const OUT = arg('out', path.join(ROOT, 'bench/results/soak.jsonl'), 'append the result row to this file');
const JSON_OUT = flag('json', 'print the result row as JSON');
const SAMPLES = arg('samples', '', 'also write every 2 s sample (hub and holders memory by kind) to this file, one JSON line each');
const KEEP = flag('keep', 'leave the state dir in place');
/** Per-process heap figures of the holders (bench/memstat-hook.ts, loaded into every process of the swarm). */
const MEMSTAT = !flag('no-memstat', 'do not load bench/memstat-hook.ts into the swarm\'s processes (no holders_mem)');
/** A CPU profile of each hub's life that ends gracefully (the last one, at `swarm down`; a killed hub writes none). */
const HUB_PROF = arg('hub-prof', '', 'write the hub\'s CPU profile (--cpu-prof) into this dir (SWARM_HUB_NODE_ARGS)');
const HUB_LIMIT = arg('hub-limit', '', 'run the hub inside a cgroup v1 memory limit: `render` (deploy/render/hub-mem.ts at the horizon) or MiB (needs root)');
checkArgs('soak', 'Soak: echo tasks through swarm up --agents 25 (failover on), prompts of 100 B to 16 KB, worker, hub and holder kills at fixed marks;\nreports RSS, hot state and archive bytes, restart times and CPU per task, and checks lost/duplicated/changed.');
const AGENTS = 25;
/** Faults by the fraction of tasks done; the CPU windows lie between them, each within one hub's life. */
const WORKER_KILLS = [0.25, 0.45, 0.65];
const HUB_KILLS = [0.35, 0.55, 0.75];
const HOLDER_RESTART = 0.9;
// Both windows in a steady state: past the warm-up (the hot state filling) and 5% after the hub
// restart before them (its handbacks and the holders' full syncs are the restart's cost, not the load's).
const CPU_START: [number, number] = [0.1, 0.2];
const CPU_END: [number, number] = [0.8, 0.89];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => { if (!JSON_OUT) process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`); };
const load = () => os.loadavg().map((x) => +x.toFixed(2));

const prompt = soakPrompt;
const idOf = (i: number) => `soak-${i}`;

interface Sample { t_s: number; done: number; cg?: CgroupUse; hub_rss_mb: number; holders_rss_mb: number; holders: number; hot_mb: number; archive_mb: number; holders_mem?: HoldersMem; hub_mem?: HubMem }
/** The hub's memory by kind (MB), from its memstat file: live JS, V8's headroom, buffers, the rest (malloc, code). */
interface HubMem { heap_used: number; heap_total: number; old_used: number; old_size: number; large_used: number; external: number; array_buffers: number; outside_v8: number; malloced: number }
/** The holders' memory by kind, summed over their processes (MB): what of the RSS is live JS, V8's headroom, buffers, malloc. */
interface HoldersMem { heap_used: number; heap_total: number; old_used: number; old_size: number; external: number; outside_v8: number; per_pid: Record<string, unknown>[] }
interface Status { tasks: { done: number }; workers: { id: string; pid?: number }[]; failover: { holders: string[] } }

function pidOf(dir: string, worker: string): number | undefined {
  try { const t = fs.readFileSync(path.join(dir, 'pids', `${worker}.pid`), 'utf8').trim(); return t.startsWith('{') ? (JSON.parse(t) as { pid: number }).pid : Number(t); } catch { return undefined; }
}
function workerPids(dir: string): number[] {
  return [...new Set(fs.readdirSync(path.join(dir, 'pids')).map((f) => pidOf(dir, f.replace(/\.pid$/, ''))).filter((p): p is number => !!p))];
}
const bytesIn = (d: string, keep: (f: string) => boolean) => { try { return fs.readdirSync(d).filter(keep).reduce((a, f) => a + fs.statSync(path.join(d, f)).size, 0); } catch { return 0; } };
const hotBytes = (dir: string) => bytesIn(dir, (f) => /^(journal|snapshot).*\.ndjson/.test(f));
const archiveBytes = (dir: string) => bytesIn(path.join(dir, 'results'), () => true);
const safe = (f: () => number) => { try { return f(); } catch { return 0; } };
const memstatDir = (dir: string) => path.join(dir, 'memstat');
interface MemStat { heap_used: number; heap_total: number; external: number; outside_v8: number; spaces: Record<string, { size: number; used: number }> }
function holdersMem(dir: string, pids: number[]): HoldersMem | undefined {
  const per = pids.map((p) => { try { return JSON.parse(fs.readFileSync(path.join(memstatDir(dir), `${p}.json`), 'utf8')) as MemStat; } catch { return undefined; } }).filter((x) => !!x);
  if (!per.length) return undefined;
  const sum = (f: (x: (typeof per)[number]) => number) => +per.reduce((a, x) => a + f(x), 0).toFixed(1);
  return { heap_used: sum((x) => x.heap_used), heap_total: sum((x) => x.heap_total), old_used: sum((x) => x.spaces.old?.used ?? 0), old_size: sum((x) => x.spaces.old?.size ?? 0), external: sum((x) => x.external), outside_v8: sum((x) => x.outside_v8), per_pid: per as unknown as Record<string, unknown>[] };
}

function hubMem(dir: string, pid: number): HubMem | undefined {
  let x: MemStat & { array_buffers: number; malloced: number };
  try { x = JSON.parse(fs.readFileSync(path.join(memstatDir(dir), `${pid}.json`), 'utf8')) as typeof x; } catch { return undefined; }
  return { heap_used: x.heap_used, heap_total: x.heap_total, old_used: x.spaces.old?.used ?? 0, old_size: x.spaces.old?.size ?? 0, large_used: x.spaces.large_object?.used ?? 0, external: x.external, array_buffers: x.array_buffers, outside_v8: x.outside_v8, malloced: x.malloced };
}

/** When each "replica holder behind" line of the hubs' logs was written (epoch ms), in order. */
function behindTimes(dir: string): number[] {
  const out: number[] = [];
  let files: string[] = [];
  try { files = fs.readdirSync(path.join(dir, 'logs')).filter((f) => f.startsWith('hub')); } catch { return out; }
  for (const f of files) {
    let text = '';
    try { text = fs.readFileSync(path.join(dir, 'logs', f), 'utf8'); } catch { continue; }
    for (const line of text.split('\n')) {
      if (!line.includes('replica holder behind')) continue;
      try { out.push((JSON.parse(line) as { time: number }).time); } catch { /* a torn line */ }
    }
  }
  return out.sort((a, b) => a - b);
}

/** `swarm up` on the state dir: wall time and its own ready_ms. */
function up(dir: string): { wall_ms: number; ready_ms: number | null; ok: boolean; err?: string } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [CLI, 'up', '--agents', String(AGENTS), '--procs', PROCS, '--driver', 'echo', '--detach', '--json', '--ready-timeout', '120000', '--state-dir', dir, '--archive-max', ARCHIVE_MAX, ...(RETAIN ? ['--retain', RETAIN] : [])], { encoding: 'utf8', timeout: 150_000 });
  const wall = Math.round(performance.now() - t0);
  let ready: number | null = null;
  try { ready = (JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { ready_ms?: number }).ready_ms ?? null; } catch { /* not JSON: the error below */ }
  return r.status === 0 ? { wall_ms: wall, ready_ms: ready, ok: true } : { wall_ms: wall, ready_ms: ready, ok: false, err: `${r.stdout}${r.stderr}`.slice(-400) };
}

/** Until the hub has all agents again, none in process `gone`, and its holders; ms, or null past 60 s. */
async function workersBack(dir: string, gone: number, t0: number): Promise<number | null> {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    const s = await api<Status>(dir, 'GET', '/status');
    if (s && s.workers.length === AGENTS && s.workers.every((w) => w.pid !== gone) && s.failover.holders.length >= 3) return Math.round(performance.now() - t0);
    await sleep(50);
  }
  return null;
}

async function main(): Promise<void> {
  if (RETAIN) parseRetain(RETAIN); // a bad value fails here, before a swarm starts
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-soak-'));
  if (MEMSTAT) {
    process.env.SWARM_BENCH_MEMSTAT_DIR = memstatDir(dir);
    process.env.SWARM_NODE_ARGS = `${process.env.SWARM_NODE_ARGS ?? ''} --import ${path.join(ROOT, 'dist/bench/memstat-hook.js')}`.trim();
  }
  let cgroup: HubCgroup | undefined;
  const cgroupLog = path.join(dir, 'cgroup-joined');
  if (HUB_LIMIT) {
    const mib = HUB_LIMIT === 'render' ? renderedHubMem(RETAIN ? parseRetain(RETAIN) : undefined).limit : Number(HUB_LIMIT);
    if (!(mib > 0)) throw new Error(`--hub-limit ${HUB_LIMIT}: expected render or a number of MiB`);
    cgroup = HubCgroup.create(`swarm-soak-${process.pid}`, mib);
    process.env.SWARM_BENCH_HUB_CGROUP = cgroup.dir;
    process.env.SWARM_BENCH_HUB_CGROUP_LOG = cgroupLog;
    // Where the hub's children go: the group this bench runs in (the hub's workers are not the hub's memory).
    process.env.SWARM_BENCH_HUB_CGROUP_HOME = path.join('/sys/fs/cgroup/memory', /^\d+:memory:(.*)$/m.exec(fs.readFileSync('/proc/self/cgroup', 'utf8'))?.[1] ?? '/');
    process.env.SWARM_HUB_NODE_ARGS = `${process.env.SWARM_HUB_NODE_ARGS ?? ''} --import ${path.join(ROOT, 'dist/bench/cgroup-hook.js')}`.trim();
    log(`hub limited to ${mib} MiB (${cgroup.dir})`);
    // Removed however the bench ends (its processes stopped first, else they move to the root group).
    const g = cgroup;
    process.once('exit', () => { if (fs.existsSync(g.dir)) g.remove(); });
  }
  if (HUB_PROF) process.env.SWARM_HUB_NODE_ARGS = `${process.env.SWARM_HUB_NODE_ARGS ?? ''} --cpu-prof --cpu-prof-dir=${path.resolve(HUB_PROF)}`.trim();
  const started = Date.now();
  const deadline = started + MAX_MIN * 60_000;
  const loadStart = load();
  const first = up(dir);
  if (!first.ok) throw new Error(`swarm up failed: ${first.err}`);
  log(`up in ${first.wall_ms} ms (${dir})`);
  const restarts: Record<string, unknown>[] = [{ kind: 'start', ...first }];
  const samples: Sample[] = [];
  const cpuMarks: Record<string, { at: number; cpu: number; hub: number; t: number; holders: string; holdersCpu: number }> = {};
  let done = 0, failed = 0, submitted = 0, acked = 0;
  /** Submits the hub refused, by error code (SWARM_ERR_QUEUE_FULL: the queue, or the hot state past its bound). */
  const refusals: Record<string, number> = {};
  /** Why the run ended early (a swarm that did not come back), if it did. */
  let aborted: string | undefined;
  let unfinished = 0;
  /** Acknowledged ranges as (first, count) pairs: batches finish out of order, and an aborted run acknowledges some only. */
  const ackedIds: number[] = [];
  let holderPidsCache: number[] = [];
  const hubPid = () => hubFile(dir)?.pid ?? 0;
  /** Every hub process of the run (their memstat histories give the loop's delay and the GC's share). */
  const hubPids = new Set<number>();

  const sample = async () => {
    const s = await api<Status>(dir, 'GET', '/status');
    if (s) holderPidsCache = [...new Set(s.failover.holders.map((h) => pidOf(dir, h)).filter((p): p is number => !!p))];
    const hub = hubPid();
    if (hub > 0) hubPids.add(hub);
    samples.push({
      t_s: +((Date.now() - started) / 1000).toFixed(1), done, ...(cgroup ? { cg: cgroup.use() } : {}), hub_rss_mb: +safe(() => rssMb(hub)).toFixed(1),
      holders_rss_mb: +holderPidsCache.reduce((a, p) => a + safe(() => rssMb(p)), 0).toFixed(1), holders: holderPidsCache.length,
      hot_mb: +(hotBytes(dir) / 2 ** 20).toFixed(2), archive_mb: +(archiveBytes(dir) / 2 ** 20).toFixed(2),
      ...(MEMSTAT ? { holders_mem: holdersMem(dir, holderPidsCache), hub_mem: hubMem(dir, hub) } : {}),
    });
  };
  let sampling = true;
  const sampler = (async () => { while (sampling) { await sample(); await sleep(2000); } })();

  /** One batch: submit until acknowledged, then wait until every task is final (both retried across hub restarts). */
  const runBatch = async (from: number, n: number): Promise<void> => {
    const tasks = Array.from({ length: n }, (_, k) => ({ id: idOf(from + k), prompt: prompt(from + k) }));
    for (let tries = 0; ; tries++) {
      if (aborted || Date.now() > deadline + 120_000 || tries > 2000) return; // never acknowledged: not checked
      // An error is `{code, msg}` (a 429 while the queue or the hot state is full): not acknowledged, tried again.
      const r = await api<{ accepted?: unknown[]; code?: string }>(dir, 'POST', '/tasks', { tasks });
      if (r && Array.isArray(r.accepted)) break;
      if (r?.code) refusals[r.code] = (refusals[r.code] ?? 0) + 1;
      await sleep(250);
    }
    ackedIds.push(from, n);
    acked += n;
    const ids = tasks.map((t) => t.id);
    for (let tries = 0; ; tries++) {
      if (aborted || Date.now() > deadline + 300_000 || tries > 2000) { unfinished += n; return; }
      const r = await api<{ complete?: boolean; tasks?: { state: string }[]; code?: string }>(dir, 'POST', '/wait', { ids, timeout_ms: 20_000 });
      if (r?.complete && r.tasks) { for (const t of r.tasks) { if (t.state === 'done') done++; else failed++; } return; }
      await sleep(r && !r.code ? 0 : 250);
    }
  };

  const faults: { at: number; kind: 'worker' | 'hub' | 'holder' }[] = [
    ...WORKER_KILLS.map((at) => ({ at, kind: 'worker' as const })), ...HUB_KILLS.map((at) => ({ at, kind: 'hub' as const })), { at: HOLDER_RESTART, kind: 'holder' as const },
  ].sort((a, b) => a.at - b.at);
  const fault = async (kind: 'worker' | 'hub' | 'holder'): Promise<void> => {
    const frac = +(done / TASKS).toFixed(3);
    if (kind === 'hub') {
      const pid = hubPid();
      if (pid > 0) process.kill(pid, 'SIGKILL');
      await sleep(100);
      // An operator tries again; a swarm that is not ready after three tries ends the run (then checked).
      for (let attempt = 1; attempt <= 3; attempt++) {
        const r = up(dir);
        restarts.push({ kind, at_done: frac, attempt, ...r });
        log(`hub killed at ${frac}: up (try ${attempt}) ${r.ok ? 'ready' : 'NOT ready'} in ${r.wall_ms} ms (ready_ms ${r.ready_ms})`);
        if (r.ok) return;
        await sleep(3000); // a `swarm up` that gave up is still stopping what it started
      }
      aborted = `no hub ready after the kill at ${frac}`;
      return;
    }
    const s = await api<Status>(dir, 'GET', '/status');
    const holders = new Set((s?.failover.holders ?? []).map((h) => pidOf(dir, h)));
    const all = workerPids(dir);
    const pick = kind === 'holder' ? all.find((p) => holders.has(p)) : all.find((p) => !holders.has(p));
    if (!pick) { restarts.push({ kind, at_done: frac, skipped: 'no such process' }); return; }
    const t0 = performance.now();
    process.kill(pick, 'SIGKILL');
    const ms = await workersBack(dir, pick, t0);
    restarts.push({ kind, at_done: frac, pid: pick, ready_ms: ms });
    log(`${kind} process ${pick} killed at ${frac}: back in ${ms} ms`);
  };

  // Submission: up to WINDOW batches in flight; faults and CPU marks as `done` passes them.
  const inflight = new Set<Promise<void>>();
  let next = 0;
  const markCpu = (name: string) => {
    const h = hubPid();
    // The holders' processes too (the same set at both ends of a window, else no figure): what a holder pays to keep up.
    const hp = [...holderPidsCache].sort((a, b) => a - b);
    cpuMarks[name] = { at: done, cpu: safe(() => cpuSeconds(h)), hub: h, t: Date.now(), holders: hp.join(','), holdersCpu: hp.reduce((a, p) => a + safe(() => cpuSeconds(p)), 0) };
  };
  let lastLog = 0;
  while ((next < TASKS || inflight.size > 0) && Date.now() < deadline + 300_000) {
    while (!aborted && next < TASKS && inflight.size < WINDOW && Date.now() < deadline) {
      const n = Math.min(BATCH, TASKS - next);
      const p = runBatch(next, n).finally(() => inflight.delete(p));
      inflight.add(p);
      next += n; submitted += n;
    }
    if (inflight.size) await Promise.race(inflight);
    const f = done / TASKS;
    for (const [name, mark] of [['start0', CPU_START[0]], ['start1', CPU_START[1]], ['end0', CPU_END[0]], ['end1', CPU_END[1]]] as const) if (!cpuMarks[name] && f >= mark) markCpu(name);
    // Every 5%: where CPU per task changes (a segment across a hub restart has no figure).
    for (let k = 1; k <= Math.min(20, Math.floor(f * 20)); k++) if (!cpuMarks[`p${k}`]) markCpu(`p${k}`);
    while (!aborted && faults.length && f >= faults[0]!.at) await fault(faults.shift()!.kind);
    if (Date.now() - lastLog > 15_000) {
      lastLog = Date.now();
      const m = samples.at(-1);
      log(`${done}/${TASKS} done, load ${load()[0]}${m ? `; hub rss ${m.hub_rss_mb} MB${m.cg ? ` (cgroup ${m.cg.usage_mb} MB: rss ${m.cg.rss_mb}, cache ${m.cg.cache_mb})` : ''}${m.hub_mem ? ` (heap used ${m.hub_mem.heap_used} / total ${m.hub_mem.heap_total}, external ${m.hub_mem.external}, outside V8 ${m.hub_mem.outside_v8})` : ''}, hot ${m.hot_mb} MB; holders rss ${m.holders_rss_mb} MB${m.holders_mem ? ` (heap used ${m.holders_mem.heap_used} / total ${m.holders_mem.heap_total}, external ${m.holders_mem.external}, outside V8 ${m.holders_mem.outside_v8})` : ''}` : ''}`);
    }
    // Past the deadline nothing is submitted: with nothing in flight either, the loop would spin (and starve the sampler).
    if ((aborted || next >= TASKS || Date.now() >= deadline) && inflight.size === 0) break;
  }
  await Promise.allSettled(inflight);
  // The 100% mark: the swarm as the load leaves it, before any trailing fault or the stop.
  await sample();
  const running = samples.length;
  const loadEndT = Date.now();
  // A short run can finish before its last marks: the faults still run (and are timed) on the idle swarm.
  while (!aborted && faults.length && Date.now() < deadline + 300_000) await fault(faults.shift()!.kind);
  sampling = false;
  await sampler;
  await sample();
  const loadEnd = load();
  const wallS = (Date.now() - started) / 1000;
  spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { encoding: 'utf8', timeout: 60_000 });
  let hubCgroup: Record<string, unknown> | undefined;
  if (cgroup) {
    let joined: string[] = [];
    try { joined = fs.readFileSync(cgroupLog, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')[0]!); } catch { /* no hub joined */ }
    const maxOf = (f: (u: CgroupUse) => number) => Math.max(0, ...samples.map((s) => (s.cg ? f(s.cg) : 0)));
    // Hubs that did not join: a holder promoted to hub in its own process runs outside the limit.
    const outside = [...hubPids].filter((p) => !joined.includes(String(p)));
    hubCgroup = { ...cgroup.report(joined.length), max_sampled_usage_mb: maxOf((u) => u.usage_mb), max_sampled_rss_mb: maxOf((u) => u.rss_mb), max_sampled_cache_mb: maxOf((u) => u.cache_mb), hubs_outside: outside };
    log(`hub cgroup: ${JSON.stringify(hubCgroup)}`);
    cgroup.remove();
  }

  const check = await checker(dir, ackedIds);
  const behind = behindTimes(dir);
  /** "replica holder behind" lines of the hub (every hub of the run) between two marks, and per minute. */
  const behindIn = (a: string, b: string) => {
    const x = cpuMarks[a], y = cpuMarks[b];
    if (!x || !y || y.t <= x.t) return null;
    const n = behind.filter((t) => t >= x.t && t < y.t).length;
    return { count: n, per_min: +((n * 60_000) / (y.t - x.t)).toFixed(1) };
  };
  const holdersPerTask = (a: string, b: string) => {
    const x = cpuMarks[a], y = cpuMarks[b];
    if (!x || !y || !x.holders || x.holders !== y.holders || y.at === x.at) return null;
    return +(((y.holdersCpu - x.holdersCpu) * 1e6) / (y.at - x.at)).toFixed(1); // µs of the holders' processes' CPU (summed) per task
  };
  const perTask = (a: string, b: string) => {
    const x = cpuMarks[a], y = cpuMarks[b];
    if (!x || !y || x.hub !== y.hub || y.at === x.at) return null;
    return +(((y.cpu - x.cpu) * 1e6) / (y.at - x.at)).toFixed(1); // µs of hub CPU per task
  };
  // Marks are fractions of the tasks done when the load ended (all of them, or fewer where --max-min
  // cut the run), taken on samples of the running swarm only: the last one is the 100% mark.
  const live = samples.slice(0, running), total = live.at(-1)!.done || 1;
  const at = (frac: number) => live.find((s) => s.done >= frac * total) ?? live.at(-1)!;
  const s20 = at(0.2), s100 = live.at(-1)!;
  // Single samples land anywhere in the hub's collection cycle; a mean over a window does not.
  const mean = (from: number, to: number, f: (s: Sample) => number) => {
    const xs = live.filter((s) => s.done >= from * total && s.done <= to * total).map(f).filter((x) => x > 0);
    return xs.length ? +(xs.reduce((a, x) => a + x, 0) / xs.length).toFixed(1) : 0;
  };
  const rssMarks = (f: (s: Sample) => number) => {
    const m1 = mean(0.15, 0.25, f), m2 = mean(0.9, 1, f);
    return { at20: f(s20), at100: f(s100), growth_pct: growth(f(s20), f(s100)), mean_15_25: m1, mean_90_100: m2, mean_growth_pct: growth(m1, m2), max: Math.max(...samples.map(f)) };
  };
  const hubRestarts = restarts.filter((r) => r.kind === 'hub').map((r) => r.wall_ms as number);
  const procRestarts = restarts.filter((r) => r.kind === 'worker' || r.kind === 'holder').map((r) => r.ready_ms as number | null);
  const growth = (a: number, b: number) => (a > 0 ? +((100 * (b - a)) / a).toFixed(1) : null);
  const maxHot = Math.max(...samples.map((s) => s.hot_mb));
  const row = {
    date: new Date().toISOString(), machine: machine(), command: `node dist/bench/soak.js ${process.argv.slice(2).join(' ')}`.trim(),
    tasks: TASKS, agents: AGENTS, procs: PROCS, retain: RETAIN || 'default', ...(hubCgroup ? { hub_cgroup: hubCgroup } : {}), archive_max: ARCHIVE_MAX, acknowledged: acked, submit_refused: refusals, done, failed, unfinished_at_end: unfinished, aborted: aborted ?? null, wall_s: +wallS.toFixed(1),
    tasks_per_s: Math.round(done / wallS), load_start: loadStart, load_end: loadEnd,
    ...check,
    rss_marks: { tasks_at_100: total, sample_at20: { t_s: s20.t_s, done: s20.done }, sample_at100: { t_s: s100.t_s, done: s100.done } },
    hub_rss_mb: rssMarks((s) => s.hub_rss_mb),
    holders_rss_mb: rssMarks((s) => s.holders_rss_mb),
    ...(MEMSTAT ? { hub_mem: { at20: s20.hub_mem, at100: [...live].reverse().find((s) => s.hub_mem)?.hub_mem, max_heap_total: Math.max(...samples.map((s) => s.hub_mem?.heap_total ?? 0)), max_outside_v8: Math.max(...samples.map((s) => s.hub_mem?.outside_v8 ?? 0)) } } : {}),
    ...(MEMSTAT ? { holders_mem: { at20: s20.holders_mem, at100: [...live].reverse().find((s) => s.holders_mem)?.holders_mem, max_heap_total: Math.max(...samples.map((s) => s.holders_mem?.heap_total ?? 0)) } } : {}),
    hot_mb: { at20: s20.hot_mb, at100: s100.hot_mb, max: maxHot }, archive_mb: samples.at(-1)!.archive_mb,
    restarts, hub_restart_max_ms: Math.max(...hubRestarts), worker_restart_max_ms: procRestarts.some((x) => x === null) ? null : Math.max(...(procRestarts as number[])),
    ...(MEMSTAT ? { hub_loop: hubLoop(dir, [...hubPids], started, loadEndT) } : {}),
    hub_cpu_us_per_task: { start: perTask('start0', 'start1'), end: perTask('end0', 'end1') },
    holders_cpu_us_per_task: { start: holdersPerTask('start0', 'start1'), end: holdersPerTask('end0', 'end1') },
    holders_behind: { total: behind.length, per_min: +((behind.length * 60_000) / (wallS * 1000)).toFixed(1), start: behindIn('start0', 'start1'), end: behindIn('end0', 'end1') },
    hub_cpu_us_per_task_by_5pct: Array.from({ length: 19 }, (_, k) => perTask(`p${k + 1}`, `p${k + 2}`)),
    rss_over_time: samples.filter((_, i) => i % Math.max(1, Math.floor(samples.length / 40)) === 0 || i === samples.length - 1).map(({ holders_mem: m, hub_mem: h, cg, ...s }) => ({ ...s, ...(cg ? { cgroup_mb: cg.usage_mb, cgroup_rss_mb: cg.rss_mb } : {}), ...(m ? { holders_heap_used_mb: m.heap_used, holders_heap_total_mb: m.heap_total, holders_external_mb: m.external, holders_outside_v8_mb: m.outside_v8 } : {}), ...(h ? { hub_heap_used_mb: h.heap_used, hub_heap_total_mb: h.heap_total, hub_external_mb: h.external, hub_outside_v8_mb: h.outside_v8 } : {}) })),
  };
  if (SAMPLES) fs.writeFileSync(SAMPLES, samples.map((x) => JSON.stringify(x.holders_mem ? { ...x, holders_mem: { ...x.holders_mem, per_pid: undefined } } : x)).join('\n') + '\n');
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.appendFileSync(OUT, JSON.stringify(row) + '\n');
  console.log(JSON_OUT ? JSON.stringify(row) : JSON.stringify(row, null, 2));
  if (KEEP) log(`kept ${dir}`); else fs.rmSync(dir, { recursive: true, force: true });
}

interface LoopSample { t: number; eld_max_ms: number; eld_p99_ms: number; eld_p50_ms?: number; gc_ms: number; gc_max_ms: number; gc_major_ms?: number; cpu_s: number }
/**
 * The hubs' event loop while the load ran (from `from` to `to`, epoch ms), over their 2 s memstat samples:
 * the loop's delay (percentiles over the samples of each sample's p50, p99 and max), the GC's pauses as a
 * share of wall time, the hub's CPU as a share of one core.
 */
function hubLoop(dir: string, pids: number[], from: number, to: number): Record<string, unknown> | null {
  const xs: LoopSample[] = [];
  for (const pid of pids) {
    let text = '';
    try { text = fs.readFileSync(path.join(memstatDir(dir), `${pid}.jsonl`), 'utf8'); } catch { continue; }
    let prevCpu: number | undefined;
    for (const line of text.split('\n')) {
      let x: LoopSample;
      try { x = JSON.parse(line) as LoopSample; } catch { continue; }
      // cpu_s is cumulative: a sample's share is the step from the one before (the first of a life has none).
      const cpu = prevCpu === undefined ? NaN : x.cpu_s - prevCpu;
      prevCpu = x.cpu_s;
      if (x.t >= from + 2000 && x.t <= to) xs.push({ ...x, cpu_s: cpu });
    }
  }
  if (!xs.length) return null;
  const pct = (v: number[], p: number) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!; };
  const of = (f: (x: LoopSample) => number) => { const v = xs.map(f).filter((n) => Number.isFinite(n)); return v.length ? { p50: pct(v, 50), p90: pct(v, 90), max: Math.max(...v) } : null; };
  const cpu = xs.map((x) => x.cpu_s).filter((n) => Number.isFinite(n));
  return {
    samples: xs.length, eld_p50_ms: of((x) => x.eld_p50_ms ?? NaN), eld_p99_ms: of((x) => x.eld_p99_ms), eld_max_ms: of((x) => x.eld_max_ms),
    gc_share_pct: +((100 * xs.reduce((a, x) => a + x.gc_ms, 0)) / (xs.length * 2000)).toFixed(1),
    gc_major_share_pct: +((100 * xs.reduce((a, x) => a + (x.gc_major_ms ?? 0), 0)) / (xs.length * 2000)).toFixed(1), gc_max_ms: Math.max(...xs.map((x) => x.gc_max_ms)),
    cpu_share_pct: cpu.length ? +((100 * cpu.reduce((a, x) => a + x, 0)) / (cpu.length * 2)).toFixed(1) : null,
    // The pauses against the hub's own CPU time (a loaded host stretches both alike).
    gc_of_cpu_pct: cpu.length ? +((100 * xs.filter((x) => Number.isFinite(x.cpu_s)).reduce((a, x) => a + x.gc_ms, 0) / 1000) / cpu.reduce((a, x) => a + x, 0)).toFixed(1) : null,
  };
}

/**
 * Every acknowledged id (`ranges`: first, count pairs): lost if neither the archive nor the hot state has it
 * done, duplicated if two different results were recorded (another worker or finish time), changed if
 * its text is not the echo of its prompt; the same result written twice is `recorded_twice_same_result`.
 */
async function checker(dir: string, ranges: number[]): Promise<{ lost: number; duplicated: number; changed: number; recorded_twice_same_result: number; failed_final: number; archived: number; hot_done: number }> {
  const archived = new Map<string, { n: number; results: Set<string> }>();
  let changed = 0, failedFinal = 0;
  const seen = (id: string, state: string, text: string | undefined) => {
    const i = Number(id.slice(5));
    if (state !== 'done') { failedFinal++; return; }
    if (text !== `echo: ${prompt(i)}`) changed++;
  };
  for (const f of fs.readdirSync(path.join(dir, 'results')).sort()) {
    const rl = readline.createInterface({ input: fs.createReadStream(path.join(dir, 'results', f)), crlfDelay: Infinity });
    for await (const line of rl) {
      if (!line) continue;
      let a: { t?: string; id?: string; state?: string; finished_at?: number; result?: { text?: string; worker?: string } };
      try { a = JSON.parse(line) as typeof a; } catch { continue; }
      if (a.t !== 'archived' || !a.id?.startsWith('soak-')) continue;
      const key = `${a.result?.worker}@${a.finished_at}`;
      const prev = archived.get(a.id);
      if (!prev) { archived.set(a.id, { n: 1, results: new Set([key]) }); seen(a.id, a.state!, a.result?.text); continue; }
      prev.n++; prev.results.add(key);
    }
  }
  const store = await TaskStore.open(dir, { maxDepth: 10_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 }, RETAIN ? { retain: parseRetain(RETAIN), evictEveryMs: 3600_000 } : { evictEveryMs: 3600_000 });
  let lost = 0, duplicated = 0, copies = 0, hotDone = 0;
  try {
    for (let r = 0; r < ranges.length; r += 2) for (let i = ranges[r]!; i < ranges[r]! + ranges[r + 1]!; i++) {
      const id = idOf(i);
      const a = archived.get(id);
      const inArchive = a?.n ?? 0;
      const hot = store.queue.get(id);
      const hotFinal = hot && (hot.state === 'done' || hot.state === 'failed');
      if (hotFinal) hotDone++;
      if (hotFinal && hot.result) a?.results.add(`${hot.result.worker}@${hot.finishedAt}`);
      // Ran twice: two different results (worker, finish time) recorded; the same result written twice is a copy.
      if (a && a.results.size > 1) duplicated++;
      else if (inArchive > 1 || (inArchive && hotFinal)) copies++;
      if (!inArchive && !hotFinal) { lost++; continue; }
      if (!inArchive && hot) seen(id, hot.state, hot.result?.text);
    }
  } finally { await store.close(); }
  return { lost, duplicated, changed, recorded_twice_same_result: copies, failed_final: failedFinal, archived: archived.size, hot_done: hotDone };
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`); process.exit(1); });
