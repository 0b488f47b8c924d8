/**
 * Failover benchmarks, phase 2: real processes. `swarm hub` and one
 * `swarm worker --failover --count N` process (echo driver), M tasks.
 *   npx tsc -p . && node dist/bench/failover-e2e.js [--workers 25] [--tasks 500] [--latency-ms 50] [--trials 10] [--kill-within 0.8] [--keep-slow]
 * Prints JSON lines:
 *   fault-free: submit -> every task recorded by the hub (the baseline run time).
 *   trial: the hub killed (SIGKILL) at a random moment in the first 80 % of the baseline; detection =
 *     kill -> each worker in gossip mode (first, last); completion = submit -> the last task final in the
 *     acting coordinator's replica; then the hub is restarted on the same state dir and the journal is
 *     counted: lost and duplicated results per task id.
 *   summary: detection p50/p90/p99/max (last worker), completion vs 1.2 x baseline + detection.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, arg, flag, checkArgs } from './args.js';
import { agents, api, bg, hubFile, kill, tally } from './failover-procs.js';

const WORKERS = Number(arg('workers', '25'));
const TASKS = Number(arg('tasks', '500'));
const LATENCY = Number(arg('latency-ms', '50'));
const TRIALS = Number(arg('trials', '10'));
/** Keep the state dir (logs, journal) of trials over the completion bound, for a look afterwards. */
const KEEP = flag('keep-slow');
/** The hub is killed at a random moment within this fraction of the fault-free run. */
const KILL_WITHIN = Number(arg('kill-within', '0.8'));
checkArgs('failover-e2e', 'Failover with real processes: swarm hub and one swarm worker --failover --count N (echo driver), M tasks, the hub killed at a random moment per trial.');

const emit = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean | Promise<boolean>, ms: number, every = 20): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (await cond()) return true; await sleep(every); }
  return cond();
}
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

type Status = { tasks: { done: number; failed: number }; failover?: { workers: unknown[] } };

async function startHub(dir: string): Promise<ChildProcess> {
  const before = hubFile(dir)?.pid;
  const c = bg(['hub', '--state-dir', dir, '--log-file', path.join(dir, 'hub.log')]);
  if (!(await until(() => { const h = hubFile(dir); return !!h && h.pid !== before && h.pid === c.pid; }, 20_000, 50))) throw new Error('hub did not start');
  return c;
}

/** Hub + workers up, tasks submitted; resolves with the submit time and the processes. */
async function setup(): Promise<{ dir: string; hub: ChildProcess; workers: ChildProcess; ids: string[]; submitAt: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-failover-'));
  const hub = await startHub(dir);
  const workers = bg(['worker', '--state-dir', dir, '--count', String(WORKERS), '--id', 'w', '--failover', '--driver', 'echo', '--driver-opt', `latency_ms=${LATENCY}`, '--log-file', path.join(dir, 'w.log')]);
  if (!(await until(async () => (await api<Status>(dir, 'GET', '/status'))?.failover?.workers.length === WORKERS, 30_000, 100))) throw new Error('workers did not join');
  await sleep(500);
  const ids = Array.from({ length: TASKS }, (_, i) => `t-${String(i).padStart(4, '0')}`);
  const submitAt = Date.now();
  await api(dir, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: `task ${id}` })) });
  return { dir, hub, workers, ids, submitAt };
}

async function teardown(s: { dir: string; hub: ChildProcess; workers: ChildProcess }, keep = false): Promise<void> {
  kill(s.workers); kill(s.hub);
  await sleep(300);
  if (!keep) fs.rmSync(s.dir, { recursive: true, force: true });
}

async function main(): Promise<void> {
  const base: number[] = [];
  for (let i = 0; i < 2; i++) {
    const s = await setup();
    await api(s.dir, 'POST', '/wait', { ids: s.ids, timeout_ms: 120_000 });
    base.push(Date.now() - s.submitAt);
    await teardown(s);
  }
  const baseline = Math.min(...base);
  emit({ kind: 'fault-free', workers: WORKERS, tasks: TASKS, latency_ms: LATENCY, runs_ms: base, baseline_ms: baseline });
  const det: number[] = [];
  const ratio: number[] = [];
  let lostAll = 0, dupAll = 0;
  for (let trial = 0; trial < TRIALS; trial++) {
    const s = await setup();
    const at = Math.floor(Math.random() * KILL_WITHIN * baseline);
    await sleep(at);
    const pre = await api<Status>(s.dir, 'GET', '/status');
    kill(s.hub);
    const killedAt = Date.now();
    const allGossip = await until(() => { const a = agents(s.dir); return a.length === WORKERS && a.every((x) => x.gossip_since !== undefined); }, 20_000, 50);
    const since = agents(s.dir).map((a) => (a.gossip_since ?? NaN) - killedAt);
    const finished = await until(() => agents(s.dir).some((a) => a.coordinating && a.replica.size === TASKS && a.replica.done + a.replica.failed === TASKS), 60_000, 50);
    const coord = agents(s.dir).find((a) => a.coordinating);
    // Runs that ended before the kill have nothing left to coordinate: completion is the hub's.
    const doneAt = coord?.last_final_at ?? NaN;
    const completion = doneAt - s.submitAt;
    await startHub(s.dir);
    await until(async () => { const st = await api<Status>(s.dir, 'GET', '/status'); return !!st && st.tasks.done + st.tasks.failed >= TASKS; }, 30_000, 100);
    await until(() => agents(s.dir).every((a) => a.mode === 'star'), 20_000, 100);
    await sleep(300);
    const r = tally(s.dir, s.ids);
    lostAll += r.lost; dupAll += r.duplicated;
    const last = Math.max(...since);
    if (allGossip) det.push(last);
    const bound = 1.2 * baseline + last;
    if (finished) ratio.push(completion / bound);
    emit({
      kind: 'trial', trial, kill_after_ms: at, done_at_kill: pre?.tasks.done, all_gossip: allGossip,
      detection_first_ms: Math.min(...since), detection_last_ms: last, completion_ms: finished ? completion : null,
      bound_ms: Math.round(bound), within_bound: finished ? completion <= bound : null, ...r,
      ...(KEEP && !(completion <= bound) ? { kept: s.dir } : {}),
    });
    await teardown(s, KEEP && !(completion <= bound));
  }
  emit({
    kind: 'summary', trials: TRIALS, baseline_ms: baseline,
    detection_ms: { p50: pct(det, 50), p90: pct(det, 90), p99: pct(det, 99), max: Math.max(...det) },
    completion_over_bound: { max: Math.max(...ratio), p50: pct(ratio, 50) }, lost: lostAll, duplicated: dupAll,
  });
  process.exit(0);
}

main().catch((err) => { process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`); process.exit(1); });
