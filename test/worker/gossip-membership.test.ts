import t from 'tap';
import type { Membership } from '../../worker/gossip/membership.js';
import { cluster, runUntil } from '../helpers/membership-sim.js';
import { Suspicion } from '../../worker/gossip/suspicion.js';

function converged(nodes: Membership[], expectLive: string[]): boolean {
  const want = expectLive.slice().sort().join(',');
  return nodes.every((m) => m.live().join(',') === want);
}


t.test('lifeguard suspicion timeout shrinks with confirmations and never goes below min', async (t) => {
  t.equal(Suspicion.timeout(0, 2, 1000, 6000), 6000);
  t.ok(Suspicion.timeout(1, 2, 1000, 6000) < 6000);
  t.equal(Suspicion.timeout(2, 2, 1000, 6000), 1000);
  t.equal(Suspicion.timeout(5, 0, 1000, 6000), 1000);
});

for (const n of [25, 100]) {
  t.test(`${n} members joining through one seed converge to the same view`, async (t) => {
    const { clock, nodes, ids } = cluster(n, n, { seedOnly: true });
    const ms = runUntil(clock, () => converged(nodes, ids), 60_000);
    t.ok(ms !== undefined, `converged (simulated ${ms} ms)`);
    for (const m of nodes) m.stop();
  });
}

t.test('a killed member is detected as dead by every other member; nobody else is', async (t) => {
  const { clock, ids, kill } = cluster(25, 7);
  clock.run(3000);
  const { victim, rest } = kill(5);
  const ms = runUntil(clock, () => converged(rest, ids.filter((i) => i !== victim.id)), 60_000);
  t.ok(ms !== undefined, `detected in simulated ${ms} ms`);
  t.ok(rest.every((m) => m.get(victim.id)?.state === 'dead'), 'every survivor marks it dead');
  for (const m of rest) m.stop();
});

t.test('a suspected member that is alive refutes with a higher incarnation', async (t) => {
  const { clock, net, nodes, ids, isolate } = cluster(10, 3);
  clock.run(2000);
  // Cut it off long enough to be suspected, not long enough to be declared dead.
  const { victim: slow } = isolate(2);
  const suspected = runUntil(clock, () => nodes.some((m) => m.get(slow.id)?.state === 'suspect'), 20_000, 10);
  t.ok(suspected !== undefined, 'became suspect');
  net.restore(slow.id);
  const ok = runUntil(clock, () => nodes.every((m) => m === slow || m.get(slow.id)?.state === 'alive'), 30_000);
  t.ok(ok !== undefined, 'everyone sees it alive again');
  t.ok(slow.incarnation > 0, `incarnation bumped to ${slow.incarnation}`);
  t.ok(converged(nodes, ids), 'all members alive in every view');
  for (const m of nodes) m.stop();
});

t.test('a partitioned member is declared dead, then rejoins when the partition heals', async (t) => {
  const { clock, net, nodes, ids, isolate } = cluster(25, 11);
  clock.run(3000);
  const { victim: cut, rest } = isolate(9);
  t.ok(runUntil(clock, () => converged(rest, ids.filter((i) => i !== cut.id)), 60_000) !== undefined, 'declared dead');
  t.ok(runUntil(clock, () => cut.live().length === 1, 600_000, 200) !== undefined, 'the cut member sees everyone dead');
  net.restore(cut.id);
  const ms = runUntil(clock, () => converged(nodes, ids), 120_000);
  t.ok(ms !== undefined, `rejoined in simulated ${ms} ms`);
  for (const m of nodes) m.stop();
});

t.test('broadcasts reach every member', async (t) => {
  const { clock, nodes } = cluster(50, 5);
  const got = new Map<string, Set<string>>();
  for (const m of nodes) m.onBroadcast((v) => {
    const s = got.get(m.id) ?? new Set();
    const news = !s.has(v as string);
    s.add(v as string); got.set(m.id, s);
    return news;
  });
  clock.run(1000);
  nodes[0]!.broadcast('k1', 'hello');
  nodes[7]!.broadcast('k2', 'world');
  const ms = runUntil(clock, () => nodes.every((m) => m === nodes[0] || got.get(m.id)?.has('hello')), 30_000);
  t.ok(ms !== undefined, `spread in ${ms} ms`);
  t.ok(runUntil(clock, () => nodes.every((m) => m === nodes[7] || got.get(m.id)?.has('world')), 30_000) !== undefined);
  for (const m of nodes) m.stop();
});
