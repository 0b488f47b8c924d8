import t from 'tap';
import { api, swarm, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, finishedInGossip, holdsState, killGroup, procs, startHub, startWorkers, tallyRun, waitRun, type Proc, type RunView } from '../helpers/failover.js';

/**
 * Failover with a topology: a map-reduce run of 536 tasks (400 mappers, 135 reducers with fan-in 4,
 * a guard) on 25 failover workers (echo driver, 50 ms a task). The hub is killed with kill -9 while
 * the mappers run; the acting coordinator must drive the run on from the replicated state (the
 * reducers and the guard are submitted by it, not by the hub) and finish it without a hub. A
 * restarted hub then resumes the run from its journal and the handed-back results: the run's output
 * and verdict must be the fault-free run's, and every task's result recorded exactly once.
 */

const N = 25;
const ITEMS = Array.from({ length: 400 }, (_, i) => `item ${i}: ${'abcdefghij'.slice(0, (i % 10) + 1)}`);
const EXPERIMENT = { name: 'mr-failover', topology: 'map-reduce', inputs: { items: ITEMS }, map_reduce: { fan_in: 4 } };
const TASKS = 400 + 100 + 25 + 7 + 2 + 1 + 1;

t.test('a map-reduce run goes on in gossip mode after kill -9 of the hub, and ends as the fault-free run does', async (t) => {
  // The fault-free run: the same experiment on its own swarm.
  const base = tempDir(t);
  const ps = procs(t);
  let hub: Proc = ps.add(await startHub(base));
  let workers: Proc = ps.add(startWorkers(base, N));
  t.ok(await until(() => agents(base).length === N, 30_000, 100), 'fault-free swarm up');
  const b = await api<{ run: string }>(base, 'POST', '/runs', { experiment: EXPERIMENT });
  const want = await waitRun(base, b.run, 120_000);
  t.equal(want?.state, 'done', 'the fault-free run finished');
  t.equal(tallyRun(base, b.run).tasks, TASKS, `the run has ${TASKS} tasks`);
  killGroup(workers); killGroup(hub);

  const dir = tempDir(t);
  hub = ps.add(await startHub(dir));
  workers = ps.add(startWorkers(dir, N));
  t.ok(await until(() => agents(dir).length === N, 30_000, 100), 'swarm up');
  const { run } = await api<{ run: string }>(dir, 'POST', '/runs', { experiment: EXPERIMENT });
  t.ok(await until(async () => { try { return ((await api<RunView>(dir, 'GET', `/runs/${run}`)).progress?.done ?? 0) >= 60; } catch { return false; } }, 30_000, 10), 'the mappers are under way');
  const before = await api<RunView>(dir, 'GET', `/runs/${run}`);
  killGroup(hub, 'SIGKILL');
  t.comment(`hub killed with ${before.progress?.done} of ${TASKS} nodes done`);
  t.ok((before.progress?.done ?? 0) < 400, 'killed before the mappers were all done: the reducers were not submitted by this hub');
  t.ok(await allInMode(dir, 'gossip', N, 20_000), 'every worker went to gossip mode');
  // The acting coordinator drives the topology: it submits the reducers and the guard itself.
  const finished = await until(() => finishedInGossip(dir, run), 120_000, 100);
  t.ok(finished, 'the acting coordinator finished the run without a hub');
  const st = JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout || '{}') as { runs?: { run: string; state: string }[] };
  t.same(st.runs?.find((x) => x.run === run)?.state, 'done', '`swarm status --json` shows the run done in gossip mode');
  const replicaDone = await until(() => { const hs = agents(dir).filter(holdsState); return hs.length > 0 && hs.every((a) => a.replica.done >= TASKS); }, 60_000, 100);
  t.ok(replicaDone, `every replica that holds the state holds all ${TASKS} tasks done`);
  if (!replicaDone) t.comment(agents(dir).map((a) => `${a.id}=${a.replica.done}`).join(' '));

  hub = ps.add(await startHub(dir));
  const got = await waitRun(dir, run, 60_000);
  t.equal(got?.state, 'done', 'the restarted hub resumed the run and it is done');
  t.equal(got?.outcome?.verdict, want?.outcome?.verdict, 'the same verdict as the fault-free run');
  t.equal(got?.outcome?.output, want?.outcome?.output, 'the same output as the fault-free run');
  t.ok((got?.outcome?.output.length ?? 0) > 0, 'a non-empty output');
  const r = tallyRun(dir, run);
  t.comment(`tasks=${r.tasks} lost=${r.lost} duplicated=${r.duplicated}`);
  t.equal(r.tasks, TASKS, 'the hub knows every task of the run');
  t.equal(r.lost, 0, 'no result lost');
  t.equal(r.duplicated, 0, 'no result recorded twice');
});
