/**
 * Restart at any age: build a state directory with N tasks of history (each finished, ~210-byte
 * prompts, the default retention horizon applied as it goes), SIGKILL the process that wrote it
 * mid-stream (tasks still being submitted and finished), then time
 * - `TaskStore.open` on it in this process (wall and CPU: replay of snapshot plus tail), and
 * - `swarm up --agents 4 --driver echo --detach` on it: `ready_ms` as `up` reports it (the hub has
 *   replayed and every worker has joined), then `swarm down`;
 * - `--kills K` times, each on a fresh copy of that state: `swarm up --agents A --procs P --driver
 *   echo` (failover on), tasks submitted without pause, the hub killed (`kill -9`) --load-s seconds
 *   after its replica holders have their whole copy (a steady swarm), `swarm up` again: `up`'s ready_ms (every worker back) and its wall time from the kill,
 *   and when the restarted hub ran a task submitted right after `up` returned (ready = accepts and
 *   dispatches). The load average at each kill beside it.
 * Run: `npm run build && node dist/bench/restart.js [options]` (`--help` lists them; --from: a state
 *   kept by --keep instead of building one; --keep-logs: each run's logs/ as DIR.logsN; --kill-in-sync:
 *   the hub killed during a holder's first whole-state sync instead of a steady swarm, once it sent
 *   --kill-at entries; --compare ROOT: each kill run once with this checkout's dist and once with
 *   ROOT's (another checkout, built), alternating which goes first, so that a change is measured
 *   against its base under the same load; --kills-only: no in-process open and no first `up`).
 *   Writes bench/results/restart.json.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TaskStore } from '../hub/store.js';
import { parseRetain } from '../hub/retention.js';
import { machine } from './proc.js';
import { api, hubFile } from './failover-procs.js';
import { CLI, ROOT, arg as declare, checkArgs, flag } from './args.js';

const SELF = fileURLToPath(import.meta.url);
const CHILD = process.argv[2] === '--child';
const O = CHILD ? undefined : {
  tasks: declare('tasks', '1000000', 'tasks of history to build'),
  retain: declare('retain', '24h,100000', 'the retention horizon (swarm up --retain)'),
  keep: flag('keep', 'keep the built state (its path is printed)'),
  from: declare('from', '', 'a state kept by --keep, instead of building one (copied, never changed)'),
  kills: declare('kills', '5', 'hub kills, each on a fresh copy of the state'),
  agents: declare('agents', '25', 'agents of each kill run'),
  procs: declare('procs', '5', 'worker processes of each kill run'),
  loadS: declare('load-s', '3', 'seconds of client load before each kill'),
  keepLogs: flag('keep-logs', "each kill run's logs/ kept as DIR.logsN"),
  killInSync: flag('kill-in-sync', "kill during a holder's first whole-state sync instead of a steady swarm"),
  killAt: declare('kill-at', '1', 'with --kill-in-sync: once the sync sent this many entries'),
  compare: declare('compare', '', "another checkout's root: each kill runs with its dist too, alternating which goes first"),
  killsOnly: flag('kills-only', 'only the kill runs (no in-process open, no first swarm up)'),
  downS: declare('down-s', '0', 'seconds the hub stays down after the kill (past the workers\' failover time, about 3.5 s, they run in gossip mode meanwhile)'),
};
if (O) checkArgs('restart', 'Restart at any age: a state with N tasks of history, the hub killed (kill -9) under load and started again;\nreports kill -> `swarm up` returned and kill -> first result, and the restarted hub\'s timeline and CPU.');
const load = (): number[] => os.loadavg().map((x) => +x.toFixed(1));
const cpu = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const Q = { maxDepth: 1_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 };
const J = { fsyncMs: 0 };

/** Child: write `n` tasks of history into `dir`, then keep going (new work in flight) until killed. */
async function build(dir: string, n: number, retain: string): Promise<void> {
  const s = await TaskStore.open(dir, Q, J, { retain: parseRetain(retain), evictEveryMs: 3600_000 });
  const w = { id: 'w', caps: [] as string[] };
  const pad = 'x'.repeat(180);
  const B = 5000;
  let i = 0;
  const round = async (): Promise<void> => {
    await s.submitMany(Array.from({ length: B }, (_, k) => ({ id: `t-${i + k}`, prompt: `prompt ${i + k} ${pad}` })));
    const done: Promise<unknown>[] = [];
    for (let k = 0; k < B; k++) { const r = s.lease(w); if (r) done.push(s.complete(r.id, { text: `result ${r.id}`, worker: 'w', attempt: 1 })); }
    await Promise.all(done);
    i += B;
    await s.evict();
  };
  while (i < n) {
    await round();
    if (i % 100_000 === 0) process.stdout.write(`progress ${i}\n`);
  }
  process.stdout.write(`built ${i}\n`);
  // Still writing when the parent's SIGKILL lands: "any point".
  for (;;) await round();
}

/** Control API calls of the bench give up after this long (a hub killed mid-call). */
const CALL_MS = 30_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A process's CPU time so far (user and system, ms; Linux's /proc, in ticks of 10 ms), or null. */
function cpuOf(pid: number | undefined): number | null {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch { return null; }
}

/** A fresh copy of the state `from` at `to`: a hub that opens a state compacts and evicts it, so each measurement has its own. */
function copyState(from: string, to: string): void {
  fs.rmSync(to, { recursive: true, force: true });
  spawnSync('cp', ['-r', from, to]);
}

/** `swarm up --driver echo --detach --json` in a child (this event loop runs on): up's own ready_ms and wall time, or what it said. */
function swarmUp(args: string[], cli = CLI): Promise<{ readyMs?: number; wallMs: number; error?: string }> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const c = spawn(process.execPath, [cli, 'up', '--driver', 'echo', '--detach', '--json', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => c.kill('SIGKILL'), 150_000);
    c.on('close', () => {
      clearTimeout(timer);
      let readyMs: number | undefined;
      try { readyMs = (JSON.parse(out.trim().split('\n').at(-1)!) as { ready_ms: number }).ready_ms; } catch { /* below */ }
      resolve({ readyMs, wallMs: Math.round(performance.now() - t0), error: readyMs === undefined ? `${out}${err}`.slice(-2000) : undefined });
    });
  });
}

/**
 * How long until the swarm is steady: its holders have their copy (their first whole sync of the hot
 * state done), as any swarm that has run a while. At most a minute.
 */
async function holdersSynced(dir: string): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < 120; i++) {
    const st = await api<{ failover?: { holders?: string[]; feeds?: { syncing: boolean; syncs: number; synced: number; keeper?: boolean }[] } }>(dir, 'GET', '/status', undefined, CALL_MS);
    const feeds = (st?.failover?.feeds ?? []).filter((f) => !f.keeper);
    if (feeds.length && feeds.length >= (st?.failover?.holders?.length ?? 0) && feeds.every((f) => !f.syncing && f.syncs > 0 && f.synced > 0)) break;
    await sleep(500);
  }
  return Math.round(performance.now() - t0);
}

/**
 * --kill-in-sync: wait for a holder's first whole-state sync to be under way (some of it sent); false
 * if every holder's sync ended first.
 */
async function holdersSyncing(dir: string): Promise<boolean> {
  for (let i = 0; i < 1200; i++) {
    const st = await api<{ failover?: { feeds?: { syncing: boolean; syncs: number; synced: number; keeper?: boolean }[] } }>(dir, 'GET', '/status', undefined, CALL_MS);
    // The holders' feeds: the keepers' of the open tasks are listed beside them.
    const feeds = (st?.failover?.feeds ?? []).filter((f) => !f.keeper);
    if (feeds.some((f) => f.syncing && f.synced >= Math.max(1, Number(O!.killAt)))) return true;
    if (feeds.length && feeds.every((f) => !f.syncing && f.syncs > 0)) return false;
    await sleep(50);
  }
  return false;
}

/**
 * What the hub log says of the hub started after `killedAt`: when it listened; per holder that
 * reported a digest, its buckets the same as the new hub's / all; links refused for a HANDSHAKE that
 * came too late; the new hub's own timeline from the kill (its process started, replay began and
 * ended, the first and last worker joined).
 */
function restartLog(dir: string, killedAt: number): { listenMs: number | null; buckets: string[]; named: number[]; refused: number; timeline: Record<string, number>; joined: number } {
  let listenMs: number | null = null;
  const named: number[] = [];
  const buckets: string[] = [];
  let refused = 0;
  const timeline: Record<string, number> = {};
  let joined = 0;
  try {
    for (const l of fs.readFileSync(path.join(dir, 'logs', 'hub.log'), 'utf8').split('\n')) {
      const at = Number(/"time":(\d+)/.exec(l)?.[1] ?? 0);
      if (at <= killedAt) continue;
      const r = /"boot_ms":(\d+),"bind_ms":(\d+),"replay_ms":(\d+),"cpu_ms":(\d+)/.exec(l);
      if (r && timeline.replayed === undefined) {
        timeline.hub_cpu_at_replayed = Number(r[4]);
        timeline.hub_exec = at - killedAt - Number(r[1]) - Number(r[2]) - Number(r[3]);
        timeline.bound = at - killedAt - Number(r[3]);
        timeline.replayed = at - killedAt;
      }
      if (l.includes('"msg":"worker joined"')) { timeline.first_join ??= at - killedAt; timeline.last_join = at - killedAt; joined++; }
      if (listenMs === null && l.includes('"msg":"hub listening"')) listenMs = at - killedAt;
      if (l.includes('no HANDSHAKE in time')) refused++;
      const x = /"named":(\d+)/.exec(l);
      if (x && l.includes('compared id by id')) named.push(Number(x[1]));
      const h = /"buckets":(\d+),"same":(\d+)(?:,"same_with_evicted":(\d+))?/.exec(l);
      if (h) buckets.push(`${h[2]}/${h[1]}${h[3] ? ` (${h[3]} with evicted)` : ''}`);
    }
  } catch { /* no log */ }
  return { listenMs, buckets, named, refused, timeline, joined };
}

/** One kill: a live swarm on a copy of `built`, loaded, its hub killed and started again, by the `swarm` of `root` (a checkout). */
async function killRun(built: string, run: number, retain: string, root = ROOT): Promise<Record<string, unknown>> {
  const dir = `${built}.run${run}`;
  const cli = path.join(root, 'dist/cli/main.js');
  copyState(built, dir);
  const upArgs = ['--agents', O!.agents, '--procs', O!.procs, '--state-dir', dir, '--retain', retain, '--ready-timeout', '120000'];
  try {
    const first = await swarmUp(upArgs, cli);
    let stop = false;
    let submitted = 0;
    const pad = 'x'.repeat(180);
    // Clients that keep submitting, through the kill and the restart (a refused call is retried).
    const loader = (async () => {
      for (let b = 0; !stop; b++) {
        const tasks = Array.from({ length: 200 }, (_, k) => ({ id: `load-${run}-${b}-${k}`, prompt: `load ${b} ${k} ${pad}` }));
        const r = await api<{ accepted?: unknown[] }>(dir, 'POST', '/tasks', { tasks }, CALL_MS);
        if (r?.accepted) submitted += tasks.length; else await sleep(50);
        await sleep(20);
      }
    })();
    // A steady swarm, then the clients' load for a while; or (--kill-in-sync) a holder's first sync under way.
    const inSync = O!.killInSync;
    const killedInSync = inSync ? await holdersSyncing(dir) : undefined;
    const holdersSyncedMs = inSync ? null : await holdersSynced(dir);
    if (!inSync) await sleep(Number(O!.loadS) * 1000);
    const hub = hubFile(dir)!.pid;
    const loadAtKill = load();
    const tKill = performance.now();
    process.kill(hub, 'SIGKILL');
    await sleep(Math.max(50, Number(O!.downS) * 1000));
    // Off the event loop of this process: `up` runs as a child and the load keeps going meanwhile.
    const tUp = performance.now();
    const again = await swarmUp(upArgs, cli);
    const upDoneMs = Math.round(performance.now() - tKill);
    const killedAt = Date.now() - upDoneMs;
    // Ready means it takes and runs work: one task, submitted now, run to its result (first in line:
    // the clients' backlog is not what it measures).
    const probe = `probe-${run}`;
    await api(dir, 'POST', '/tasks', { tasks: [{ id: probe, prompt: 'probe', priority: 1_000_000 }] }, CALL_MS);
    const w = await api<{ complete?: boolean }>(dir, 'POST', '/wait', { ids: [probe], timeout_ms: 60_000 }, 60_000 + CALL_MS);
    const probeMs = Math.round(performance.now() - tKill);
    const upToProbeMs = Math.round(performance.now() - tUp);
    // CPU is steadier than wall on a shared host: the new hub's, from exec to its first result.
    const hubCpuMs = cpuOf(hubFile(dir)?.pid);
    // The holders' new syncs (after comparing their digests) end before the swarm stops: what they
    // exchanged is in the log (and, killed in a sync, is what it measures).
    const resyncedMs = await holdersSynced(dir);
    // What the holders' digests saved the restarted hub: finished tasks left out as held, and sent.
    const fo = (await api<{ failover?: { haveSyncs?: number; haveHeld?: number; haveSent?: number; idsNamed?: number; idsSums?: number; idsExchanges?: number; fullSyncs?: number } }>(dir, 'GET', '/status', undefined, CALL_MS))?.failover;
    stop = true;
    await loader;
    const { listenMs, buckets, named, refused, timeline, joined } = restartLog(dir, killedAt);
    const row = {
      run, ...(root !== ROOT ? { dist: root } : {}), load_at_kill: loadAtKill, first_up_ready_ms: first.readyMs ?? null, holders_synced_after_ms: holdersSyncedMs, tasks_submitted_under_load: submitted,
      kill_to_hub_listening_ms: listenMs, timeline_ms: { ...timeline, listening: listenMs, joins: joined }, restart_up_ready_ms: again.readyMs ?? null, kill_to_up_returned_ms: upDoneMs, kill_to_probe_result_ms: w?.complete ? probeMs : null, up_to_probe_result_ms: w?.complete ? upToProbeMs : null, hub_cpu_at_first_result_ms: hubCpuMs,
      ...(inSync ? { killed_in_sync: killedInSync } : {}), holders_resynced_after_probe_ms: resyncedMs, holder_buckets_same: buckets, have_held: fo?.haveHeld ?? null, have_sent: fo?.haveSent ?? null,
      ids_named: named, sums_per_holder: fo?.idsExchanges && fo.idsSums !== undefined ? Math.round(fo.idsSums / fo.idsExchanges) : null, full_syncs: fo?.fullSyncs ?? null, handshakes_refused: refused,
      ...(first.error || again.error ? { error: first.error ?? again.error } : {}),
    };
    console.error(JSON.stringify(row));
    return row;
  } finally {
    spawnSync(process.execPath, [cli, 'down', '--state-dir', dir], { encoding: 'utf8', timeout: 60_000 });
    // --keep-logs: the run's logs (and any CPU profiles) stay beside the state for a look.
    if (O!.keepLogs) {
      // Replaced, not merged: cp -r into a folder an earlier bench left puts this run's logs in logs/ under it.
      const kept = `${built}.logs${run}${root !== ROOT ? '-compare' : ''}`;
      fs.rmSync(kept, { recursive: true, force: true });
      spawnSync('cp', ['-r', path.join(dir, 'logs'), kept]);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Write `n` tasks of history into `dir` in a child process, killed (-9) 0.3-1 s after the last, mid-stream. */
async function buildState(dir: string, n: number, retain: string): Promise<void> {
  const child = spawn(process.execPath, [SELF, '--child', dir, String(n), retain], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (/built \d+/.test(out)) setTimeout(() => { child.kill('SIGKILL'); resolve(); }, 300 + Math.random() * 700);
    });
    child.once('exit', (code, sig) => { if (sig !== 'SIGKILL') reject(new Error(`builder exited ${code ?? sig}`)); });
  });
  await new Promise((r) => child.once('exit', r));
}

/** `TaskStore.open` on a copy of the state in this process, then `swarm up --no-failover` on another. */
async function openAndUp(dir: string, retain: string): Promise<Record<string, unknown>> {
  const copy = `${dir}.open`;
  copyState(dir, copy);
  const loadOpen = load();
  const w0 = performance.now();
  const c0 = cpu();
  const s = await TaskStore.open(copy, Q, J, { retain: parseRetain(retain), evictEveryMs: 3600_000 });
  const openMs = Math.round(performance.now() - w0);
  const openCpuMs = Math.round(cpu() - c0);
  const hot = s.queue.counts();
  const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
  await s.close();
  copyState(dir, copy);
  const loadUp = load();
  const up = await swarmUp(['--agents', '4', '--no-failover', '--insecure-no-auth', '--state-dir', copy, '--retain', retain]);
  spawnSync(process.execPath, [CLI, 'down', '--state-dir', copy], { encoding: 'utf8', timeout: 60_000 });
  fs.rmSync(copy, { recursive: true, force: true });
  return {
    hot_after_restart: hot, open_ms: openMs, open_cpu_ms: openCpuMs, rss_after_open_mb: rss, load_at_open: loadOpen,
    swarm_up_ready_ms: up.readyMs ?? null, swarm_up_error: up.error, load_at_up: loadUp,
  };
}

async function main(): Promise<void> {
  const n = Number(O!.tasks);
  const retain = O!.retain;
  const from = O!.from || undefined;
  const keep = O!.keep || from !== undefined;
  const dir = from ?? fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-restart-'));
  try {
    const t0 = performance.now();
    if (!from) await buildState(dir, n, retain);
    const buildS = from ? null : +((performance.now() - t0) / 1000).toFixed(1);
    // Each measurement on a copy: a hub that opens the state compacts and evicts it.
    const files = Object.fromEntries(fs.readdirSync(dir).filter((f) => f.endsWith('.ndjson')).map((f) => [f, +(fs.statSync(path.join(dir, f)).size / 2 ** 20).toFixed(1)]));
    const archiveMb = +(fs.readdirSync(path.join(dir, 'results')).reduce((a, f) => a + fs.statSync(path.join(dir, 'results', f)).size, 0) / 2 ** 20).toFixed(1);
    const opened = O!.killsOnly ? {} : await openAndUp(dir, retain);
    const kills = [];
    for (let k = 0; k < Number(O!.kills); k++) {
      // --compare: the other checkout's run goes first every other kill (a load that drifts favours neither).
      const roots = O!.compare ? (k % 2 ? [O!.compare, ROOT] : [ROOT, O!.compare]) : [ROOT];
      for (const root of roots) kills.push(await killRun(dir, k, retain, root));
    }
    const out = {
      at: new Date().toISOString(), command: `node dist/bench/restart.js ${process.argv.slice(2).join(' ')}`.trim(), machine: machine(),
      history_tasks: n, retain, build_s: buildS, files_mb: files, archive_mb: archiveMb,
      ...opened, kills,
    };
    console.log(JSON.stringify(out, null, 2));
    const file = path.join(ROOT, 'bench/results/restart.json');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  } finally { if (keep) console.log(`kept ${dir}`); else fs.rmSync(dir, { recursive: true, force: true }); }
}

if (CHILD) await build(process.argv[3]!, Number(process.argv[4]), process.argv[5]!);
else await main();
process.exit(0);
