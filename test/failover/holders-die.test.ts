import t from 'tap';
import { journal, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, hubDone, hubStatus, killGroup, procs, startHub, startWorkers, submit, expectExactlyOnce, type AgentView } from '../helpers/failover.js';

/**
 * The hub and every replica holder's process die together, with real processes. The holders are the
 * agents of three processes (a, b, c; one each); two more processes (d, e; three each) hold no replica, and the lowest id
 * of each keeps the open tasks (hub/replicate-keepers.ts). Once the hub and a, b, c are killed, the
 * acting coordinator is d-1: it must have every task the hub had not finished, run them in gossip
 * mode, and hand them back to a hub that returns; every task recorded once, with the echo's answer.
 */

const TASKS = 400;

t.test('the hub and every holder process killed together: a keeper coordinates and the open tasks finish once', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  let hub = ps.add(await startHub(dir));
  const slow = ['--driver-opt', 'latency_ms=150'];
  // One agent each: the survivors are a majority of the swarm, which a failover needs (worker/gossip/quorum.ts).
  const holders = ['a', 'b', 'c'].map((p) => ps.add(startWorkers(dir, 1, p, slow)));
  for (const p of ['d', 'e']) ps.add(startWorkers(dir, 3, p, slow));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === 9, 30_000, 100), 'all 9 workers joined with a peer port');
  const byId = () => new Map(agents(dir).map((a): [string, AgentView & { keeps_open?: boolean }] => [a.id, a]));
  t.ok(await until(() => { const m = byId(); return ['d-1', 'e-1'].every((id) => m.get(id)?.keeps_open); }, 20_000, 100), 'd-1 and e-1 keep the open tasks (the hub said so)');
  const ids = await submit(dir, TASKS);
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= 40, 30_000, 10), 'the run is under way');
  await until(() => { const r = byId().get('d-1')?.replica; return !!r && r.queued + r.leased > 0; }, 5000, 50);
  const kept = byId().get('d-1')!.replica;
  t.comment(`d-1 keeps ${kept.size} tasks (${kept.queued} queued, ${kept.leased} leased) of ${TASKS}, the finished ones dropped`);
  killGroup(hub, 'SIGKILL');
  for (const p of holders) killGroup(p, 'SIGKILL');
  const open = () => { const done = new Set((journal(dir) as { t: string; id?: string }[]).filter((r) => r.t === 'result').map((r) => r.id)); return ids.filter((id) => !done.has(id)); };
  const left = open();
  t.ok(left.length > TASKS / 4, `${left.length} tasks not finished at the hub when it died with every holder`);
  // Read before the kill (no task was submitted since): every task open then was open in d-1's copy.
  t.ok(kept.queued + kept.leased >= left.length, `d-1 had them all: ${kept.queued + kept.leased} open in its copy`);

  t.ok(await allInMode(dir, 'gossip', 6, 30_000), 'the six survivors are in gossip mode');
  t.ok(await until(() => byId().get('d-1')?.coordinating === true, 30_000, 100), 'd-1, a keeper, coordinates');
  // Its replica: the open tasks it kept, and the survivors' own results they pushed to it.
  const finished = await until(() => { const c = byId().get('d-1'); return !!c && c.replica.queued + c.replica.leased === 0 && c.replica.done >= left.length; }, 90_000, 100);
  const c = byId().get('d-1');
  t.ok(finished, `the open tasks finished in gossip mode: d-1 has ${c?.replica.done} done, ${c?.replica.queued} queued, ${c?.replica.leased} leased (${left.length} were open)`);

  hub = ps.add(await startHub(dir));
  t.ok(await hubDone(dir, TASKS, 60_000), 'the returning hub has every task final');
  t.ok(await allInMode(dir, 'star', 6, 30_000), 'the survivors handed back and are in star mode');
  expectExactlyOnce(t, dir, ids);
});
