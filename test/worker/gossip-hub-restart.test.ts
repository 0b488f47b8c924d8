import t from 'tap';
import { simSwarm } from '../helpers/gossip-sim.js';

/**
 * The hub monitor and a restarting hub (simulated clock): a link the hub's port accepted and holds
 * unanswered (a hub replaying its journal) is no dead hub, however long the hold; once that link is
 * cut, or its ACK wait runs out, the hub is failed over at once.
 */

async function silentHub(seed: number) {
  const sw = simSwarm(10, { seed });
  let at = sw.clock.now();
  await sw.runUntil(() => false, 3000, 50, () => { if (sw.clock.now() - at >= 1000) { at = sw.clock.now(); sw.hubBeat(); } });
  // The hub is killed; its successor binds its port 1.5 s later and holds every link while it replays.
  await sw.runUntil(() => false, 1500, 50);
  return sw;
}

t.test('links held for 10 s past the hub\'s last frame: no suspicion, no failover; the ACK ends it', async (t) => {
  const sw = await silentHub(31);
  for (const n of sw.nodes) n.hub.link('held');
  await sw.runUntil(() => false, 10_000, 50);
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'every node still in star mode');
  t.equal(sw.nodes.reduce((s, n) => s + n.hub.stats.suspected + n.hub.stats.declared, 0), 0, 'the hub was neither suspected nor declared dead');
  for (const n of sw.nodes) n.hub.link('answered');
  await sw.runUntil(() => false, 2000, 50, () => sw.hubBeat());
  t.ok(sw.nodes.every((n) => n.mode === 'star' && n.hub.state === 'alive'), 'star mode with the new hub');
  for (const n of sw.nodes) n.stop();
});

t.test('a suspicion under way is dropped when a link is held', async (t) => {
  const sw = simSwarm(10, { seed: 37 });
  sw.hubBeat();
  // 3.2 s of silence: past the lapse, inside the suspicion period.
  await sw.runUntil(() => sw.nodes.every((n) => n.hub.state === 'suspect'), 3500, 20);
  t.ok(sw.nodes.every((n) => n.hub.state === 'suspect'), 'every node suspects the hub');
  for (const n of sw.nodes) n.hub.link('held');
  await sw.runUntil(() => false, 8000, 50);
  t.ok(sw.nodes.every((n) => n.mode === 'star' && n.hub.state === 'alive'), 'no failover while held');
  for (const n of sw.nodes) n.stop();
});

t.test('a held link cut unanswered fails over at once; after an ACK wait ran out, held links no longer count', async (t) => {
  const sw = await silentHub(41);
  for (const n of sw.nodes) n.hub.link('held');
  await sw.runUntil(() => false, 6000, 50);
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'star mode while held');
  for (const n of sw.nodes) n.hub.link('cut');
  const ms = await sw.inGossip();
  t.ok(ms !== undefined && ms <= 3500, `every node in gossip mode ${ms} ms after the cut (at most the suspicion period)`);
  for (const n of sw.nodes) n.stop();

  const sw2 = await silentHub(43);
  for (const n of sw2.nodes) n.hub.link('held');
  await sw2.runUntil(() => false, 6000, 50);
  for (const n of sw2.nodes) { n.hub.link('timeout'); n.hub.link('held'); }
  const ms2 = await sw2.inGossip();
  t.ok(ms2 !== undefined && ms2 <= 3500, `after the ACK wait ran out, a new held link did not stop the failover (${ms2} ms)`);
  for (const n of sw2.nodes) n.stop();
});
