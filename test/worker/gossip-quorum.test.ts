import t from 'tap';
import { simSwarm } from '../helpers/gossip-sim.js';

/**
 * An acting coordinator needs a quorum of the last known membership: a minority cut off from the hub
 * and from the rest does not fail over while the hub serves the majority; a whole swarm that loses
 * its hub still does. Simulated clock and network (test/helpers/gossip-sim.ts).
 */

function beats(sw: ReturnType<typeof simSwarm>, reach: () => string[]) {
  let at = sw.clock.now();
  return () => {
    if (sw.clock.now() - at < 1000) return;
    at = sw.clock.now();
    const ok = new Set(reach());
    for (const n of sw.nodes) if (ok.has(n.id)) n.hub.heard();
  };
}

t.test('the lowest-id third cut off from the hub and the rest: no failover there; the majority stays in star mode', async (t) => {
  const sw = simSwarm(9, { seed: 21 });
  sw.seedTasks(50);
  const minority = sw.ids.slice(0, 3);
  const majority = sw.ids.slice(3);
  let cut = false;
  const beat = beats(sw, () => (cut ? majority : sw.ids));
  await sw.runUntil(() => false, 5000, 50, beat);
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'star mode while the hub beats');
  cut = true;
  sw.net.partition([minority, majority]);
  // 20 s cut: well past lapse (3 s) + suspicion (3 s at most).
  await sw.runUntil(() => false, 20_000, 50, beat);
  const low = sw.nodes.filter((n) => minority.includes(n.id));
  t.ok(low.every((n) => n.mode === 'star'), `the cut-off minority did not fail over (${low.map((n) => `${n.id}:${n.mode}/${n.hub.state}`).join(' ')})`);
  t.ok(low.every((n) => n.hub.stats.noQuorum >= 1), 'each of them found no quorum');
  t.ok(low.every((n) => !n.coordinator.isCoordinating), 'and none coordinates');
  t.ok(sw.nodes.filter((n) => majority.includes(n.id)).every((n) => n.mode === 'star'), 'the majority stays in star mode');
  // Healed: the hub is heard again, nothing to reconcile.
  cut = false;
  sw.net.heal();
  await sw.runUntil(() => false, 3000, 50, beat);
  t.ok(low.every((n) => n.hub.state === 'alive' && n.mode === 'star'), 'the hub is heard again');
  for (const n of sw.nodes) n.stop();
});

t.test('the whole swarm loses the hub: a quorum confirms and it fails over', async (t) => {
  const sw = simSwarm(9, { seed: 22 });
  sw.seedTasks(50);
  const beat = beats(sw, () => sw.ids);
  await sw.runUntil(() => false, 5000, 50, beat);
  const ms = await sw.inGossip();
  t.ok(ms !== undefined, `every node in gossip mode after ${ms} simulated ms`);
  t.same([...new Set(sw.nodes.map((n) => n.status().coordinator))], ['w-000'], 'one coordinator');
  for (const n of sw.nodes) n.stop();
});

t.test('the hub dies with a majority of the swarm: the minority left waits, then fails over once enough return', async (t) => {
  const sw = simSwarm(9, { seed: 23 });
  sw.seedTasks(20);
  let reach = sw.ids;
  const beat = beats(sw, () => reach);
  await sw.runUntil(() => false, 5000, 50, beat);
  // The hub and five workers gone at once (isolated, as a dead host is).
  const gone = sw.ids.slice(4);
  for (const id of gone) sw.net.isolate(id);
  reach = [];
  await sw.runUntil(() => false, 15_000, 50, beat);
  const left = sw.nodes.slice(0, 4);
  t.ok(left.every((n) => n.mode === 'star'), '4 of 9: no quorum, no failover');
  // One comes back (its host rebooted): 5 of 9.
  sw.net.restore(gone[0]!);
  const ms = await sw.runUntil(() => sw.nodes.slice(0, 5).every((n) => n.mode === 'gossip'), 30_000, 50, beat);
  t.ok(ms !== undefined, `5 of 9 make a quorum: gossip mode after ${ms} simulated ms`);
  for (const n of sw.nodes) n.stop();
});
