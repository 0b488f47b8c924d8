import t from 'tap';
import type { Membership } from '../../worker/gossip/membership.js';
import { cluster, runUntil } from '../helpers/membership-sim.js';

/**
 * Star mode runs the membership relaxed (probes and push-pull `relaxedMult` times less often) and an
 * idle member sets no gossip or reconnect timer: what failover costs a swarm that never fails over.
 * These check that the cheaper pace still detects a death and that a failover restores the pace at once.
 */


t.test('a relaxed cluster sends far fewer messages when nothing happens', async (t) => {
  const sent: Record<string, number> = {};
  for (const relaxed of [false, true]) {
    const { clock, net, nodes } = cluster(10, 3, { relaxed });
    clock.run(10_000); // joins settle
    const before = net.stats.delivered;
    clock.run(60_000);
    sent[String(relaxed)] = net.stats.delivered - before;
    for (const m of nodes) m.stop();
  }
  t.comment(`messages in 60 simulated s, 10 idle members: normal ${sent.false}, relaxed ${sent.true}`);
  t.ok(sent.true! > 0, 'relaxed members still probe');
  t.ok(sent.true! * 3 < sent.false!, 'relaxed: less than a third of the messages');
});

t.test('a relaxed cluster still detects a killed member; nobody else is declared dead', async (t) => {
  const { clock, nodes, ids, kill } = cluster(10, 5, { relaxed: true });
  clock.run(5000);
  const { victim, rest } = kill(4);
  const ms = runUntil(clock, () => rest.every((m) => m.get(victim.id)?.state === 'dead'), 300_000);
  t.ok(ms !== undefined, `dead in every view after simulated ${ms} ms`);
  const others = ids.filter((i) => i !== victim.id);
  t.ok(rest.every((m) => m.live().join(',') === others.join(',')), 'every other member is live in every view');
  for (const m of nodes) m.stop();
});

t.test('un-relaxing (a failover) probes at once and detects a death at the normal pace', async (t) => {
  const { clock, net, nodes, ids, kill } = cluster(10, 9, { relaxed: true });
  clock.run(5000);
  const { victim, rest } = kill(2);
  const before = net.stats.delivered + net.stats.dropped;
  for (const m of rest) m.setRelaxed(false);
  clock.advance(5);
  t.ok(net.stats.delivered + net.stats.dropped - before >= rest.length, 'every member sent a probe within 5 ms');
  const ms = runUntil(clock, () => rest.every((m) => m.get(victim.id)?.state === 'dead'), 120_000);
  t.ok(ms !== undefined, `dead in every view after simulated ${ms} ms`);
  // The same cluster never relaxed, for comparison: detection within twice its time.
  const ref = cluster(10, 9, { relaxed: false });
  ref.clock.run(5000);
  ref.nodes[2]!.stop();
  ref.net.isolate(ref.ids[2]!);
  const refRest = ref.nodes.filter((_, i) => i !== 2);
  const refMs = runUntil(ref.clock, () => refRest.every((m) => m.get(ref.ids[2]!)?.state === 'dead'), 120_000);
  t.comment(`detection after un-relaxing ${ms} ms; never relaxed ${refMs} ms`);
  t.ok(ms !== undefined && refMs !== undefined && ms <= 2 * refMs + 2000, 'about the normal pace');
  t.ok(rest.every((m) => m.live().length === ids.length - 1), 'nobody else declared dead');
  for (const m of [...nodes, ...ref.nodes]) m.stop();
});

t.test('on an idle cluster (no gossip rounds running) a broadcast wakes them until it has spread', async (t) => {
  const { clock, nodes } = cluster(8, 11, { relaxed: true });
  clock.run(20_000);
  t.equal(nodes.reduce((a, m) => a + m.pendingBroadcasts, 0), 0, 'nothing left to gossip after the joins');
  const got = new Set<string>();
  for (const m of nodes) m.onBroadcast((v, _from, key) => key === 'x' && v === 42 && !got.has(m.id) && !!got.add(m.id));
  nodes[0]!.broadcast('x', 42);
  const ms = runUntil(clock, () => got.size >= nodes.length - 1, 30_000, 10);
  t.ok(ms !== undefined, `every other member heard the broadcast (simulated ${ms} ms)`);
  t.ok(runUntil(clock, () => nodes.every((m) => m.pendingBroadcasts === 0), 60_000) !== undefined, 'and it died out');
  for (const m of nodes) m.stop();
});
