import t from 'tap';
import { api, sleep, tempDir, until } from '../helpers/cli.js';
import { allInMode, assertOncePerTask, hubDone, hubStatus, killGroup, procs, startHub, startWorkers, submit } from '../helpers/failover.js';

/**
 * Stalls are not attempts, end to end: the real `swarm hub` process stopped (SIGSTOP) for 30 s with
 * tasks in flight, then resumed (SIGCONT). Its workers' links time out both ways and its leases
 * lapse meanwhile; the workers fail over and hand back. With `--max-attempts 1` a single lease lost
 * to the stall and counted would fail its task for good (SWARM_ERR_RETRIES_EXHAUSTED), so none may.
 * SWARM_TEST_STALL_MS shortens the stop (it must stay above the heartbeats' dead-after).
 */
const N = 8;
const TASKS = 400;
const STALL_MS = Number(process.env.SWARM_TEST_STALL_MS ?? 30_000);

t.test('a hub stopped for 30 s with tasks in flight: no attempt used by the stall, each result recorded once', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  // Short heartbeats: the stall is many times the dead-after, as a 30 s stop is for the defaults.
  const hub = ps.add(await startHub(dir, ['--max-attempts', '1', '--heartbeat-ms', '500', '--dead-after-ms', '3000']));
  ps.add(startWorkers(dir, N, 'w', ['--driver-opt', 'latency_ms=100']));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === N, 20_000, 100), 'all workers joined with a peer port');
  const ids = await submit(dir, TASKS);
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= 40, 20_000, 10), 'the run is under way');
  const before = (await hubStatus(dir))!;
  killGroup(hub, 'SIGSTOP');
  t.comment(`hub stopped with ${before.tasks.done} done, ${before.tasks.leased} leased, ${before.tasks.queued} queued`);
  t.ok(before.tasks.leased > 0, 'tasks were in flight when the hub stopped');
  await sleep(STALL_MS);
  killGroup(hub, 'SIGCONT');

  t.ok(await hubDone(dir, TASKS, 60_000), 'the resumed hub has every task final');
  t.ok(await allInMode(dir, 'star', N, 30_000), 'every worker is back in star mode');
  const s = await api<{ tasks: { done: number; failed: number }; metrics: { stalls: number; longest_stall_ms: number } }>(dir, 'GET', '/status');
  t.ok(s.metrics.stalls >= 1 && s.metrics.longest_stall_ms >= STALL_MS / 2, `the hub saw its stall (${s.metrics.stalls}, longest ${s.metrics.longest_stall_ms} ms)`);
  t.equal(s.tasks.failed, 0, 'no task failed');

  assertOncePerTask(t, dir, ids);
  // Attempts as the hub counts them (a result's own `attempt` from gossip mode numbers the acting
  // coordinator's leases, unrun ones included, so it is not a count of attempts used).
  const w = await api<{ complete: boolean; tasks: { id: string; attempts: number }[] }>(dir, 'POST', '/wait', { ids, timeout_ms: 1000 });
  const used = new Map<number, number>();
  for (const x of w.tasks) used.set(x.attempts, (used.get(x.attempts) ?? 0) + 1);
  t.ok(w.complete && [...used.keys()].every((n) => n <= 1), `no task used more than its one attempt (${JSON.stringify(Object.fromEntries(used))}): the stall used none`);
});
