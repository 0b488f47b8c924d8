import t from 'tap';
import { tempDir, until } from '../helpers/cli.js';
import { agents, hubDone, hubStatus, procs, startHub, startWorkers, submit, tally } from '../helpers/failover.js';

/**
 * Failover must cost nothing visible in a run without faults: every result is recorded once
 * and no worker sends a second TASK_RES for a task. The hub counts results it drops as duplicates
 * (`duplicate_results` in /status); here it must stay 0. Before the fix, a STATE delta carrying a
 * worker's own result together with a lease it had not seen made that worker report the result again
 * (about one per worker per run with `swarm up`, a hundred with 25 agents in one process).
 */

const N = 25;
const TASKS = 1000;

t.test('a fault-free run with failover on: no duplicate TASK_RES reaches the hub, no worker leaves star mode', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  ps.add(await startHub(dir));
  // Echo without latency: results come back within the hub's delta batching window, which is what
  // made a lease and a result arrive in one delta.
  ps.add(startWorkers(dir, N, 'w', ['--driver-opt', 'latency_ms=0']));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === N, 30_000, 100), 'all workers joined with a peer port');
  const modes = new Set<string>();
  const watch = setInterval(() => { for (const a of agents(dir)) modes.add(a.mode); }, 50);
  t.teardown(() => clearInterval(watch));
  const ids = await submit(dir, TASKS);
  t.ok(await hubDone(dir, TASKS, 120_000), 'the hub has every task final');
  // Late duplicates would arrive after the last result: once every worker's replica has every task
  // done (nothing left to send), give them a last second to land.
  await until(() => agents(dir).length === N && agents(dir).every((a) => a.replica.done === TASKS), 30_000, 100);
  await new Promise((r) => setTimeout(r, 1000));
  clearInterval(watch);
  const s = (await hubStatus(dir)) as { metrics?: { duplicate_results?: number }; failover?: { workers: { mode: string }[] } } | undefined;
  const r = tally(dir, ids);
  const dups = s?.metrics?.duplicate_results;
  t.comment(`lost=${r.lost} duplicated=${r.duplicated} wrong=${r.wrong} hub duplicate_results=${dups} modes seen: ${[...modes].join(',')}`);
  t.equal(dups, 0, 'the hub dropped no duplicate TASK_RES');
  t.same([...modes], ['star'], 'no worker left star mode');
  t.ok(s?.failover?.workers.every((w) => w.mode === 'star'), 'the hub sees every worker in star mode');
  t.equal(r.lost, 0, 'no result lost');
  t.equal(r.duplicated, 0, 'no result recorded twice');
  t.equal(r.wrong, 0, 'every answer is the expected one');
});
