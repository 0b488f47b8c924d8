import t from 'tap';
import { ranInGossip, simSwarm } from '../helpers/gossip-sim.js';

t.test('hub silent: every node fails over, one coordinator runs the queue, every result once', async (t) => {
  const sw = simSwarm(25, { seed: 3, taskMs: 200 });
  const specs = sw.seedTasks(500);
  // Star mode for a while: heartbeats every second.
  await sw.runUntil(() => false, 5000, 100, () => { if (sw.clock.now() % 1000 < 100) sw.hubBeat(); });
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'star mode while the hub beats');
  // The hub dies: no more heartbeats.
  const ms = await sw.inGossip();
  t.ok(ms !== undefined && ms > 3000, `every node in gossip mode after ${ms} simulated ms`);
  const leaders = new Set(sw.nodes.map((n) => n.status().coordinator));
  t.same([...leaders], ['w-000'], 'one coordinator: the lowest id');
  const done = await sw.allDone(500, 120_000);
  t.ok(done !== undefined, `all 500 done in every replica (${done} ms)`);
  await sw.agreed(t, specs);
});

t.test('workers killed in gossip mode: their tasks are taken over, nothing lost', async (t) => {
  const sw = simSwarm(25, { seed: 5, taskMs: 300 });
  const specs = sw.seedTasks(500);
  await sw.inGossip();
  await sw.runUntil(() => sw.nodes[0]!.replica.counts().done > 100, 60_000, 50);
  // Kill three non-coordinators and, later, the coordinator itself.
  for (const i of [4, 11, 17]) sw.kill(sw.nodes[i]!);
  await sw.runUntil(() => sw.nodes[1]!.replica.counts().done > 250, 120_000, 50);
  sw.kill(sw.nodes[0]!);
  const done = await sw.allDone(500, 300_000, () => sw.live());
  t.ok(done !== undefined, `finished after the kills (${done} ms)`);
  t.ok(sw.live().every((n) => n.status().coordinator === 'w-001'), 'w-001 took over coordinating');
  await sw.agreed(t, specs);
  const reruns = [...sw.executions.values()].filter((c) => c > 1).length;
  t.ok(reruns >= 1, `${reruns} tasks ran again after their worker died (at-least-once execution)`);
});

t.test('a worker cut off in gossip mode rejoins and no result is duplicated', async (t) => {
  const sw = simSwarm(25, { seed: 9, taskMs: 300 });
  const specs = sw.seedTasks(500);
  await sw.inGossip();
  await sw.runUntil(() => sw.nodes[0]!.replica.counts().done > 50, 60_000, 50);
  const cut = sw.nodes[7]!;
  sw.net.isolate(cut.id);
  // Long enough to be declared dead and have its leases handed back.
  await sw.runUntil(() => sw.nodes[0]!.membership.get(cut.id)?.state === 'dead', 120_000, 50);
  const split = await sw.runUntil(() => cut.status().coordinator === cut.id, 300_000, 100);
  t.ok(split !== undefined, 'the cut-off worker ends up coordinating itself (split brain)');
  sw.net.restore(cut.id);
  const done = await sw.runUntil(() => sw.nodes.every((n) => n.replica.counts().done === 500 && n.membership.live().length === 25), 300_000, 50);
  t.ok(done !== undefined, `rejoined and finished (${done} ms)`);
  t.ok(sw.nodes.every((n) => n.status().coordinator === 'w-000'), 'one coordinator again');
  await sw.agreed(t, specs);
});

t.test('a hub stalled for less than lapse + suspicion causes no failover', async (t) => {
  const sw = simSwarm(25, { seed: 13 });
  let stalledUntil = 0;
  let at = sw.clock.now();
  const beat = () => { if (sw.clock.now() >= stalledUntil && sw.clock.now() - at >= 1000) { at = sw.clock.now(); sw.hubBeat(); } };
  await sw.runUntil(() => false, 4000, 50, beat);
  stalledUntil = sw.clock.now() + 3200; // SIGSTOP for 3.2 s: past the 3 s lapse, within the suspicion period
  await sw.runUntil(() => false, 8000, 50, beat);
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'still star mode');
  t.ok(sw.nodes.some((n) => n.hub.stats.suspected > 0), 'the hub was suspected, then heard again');
  for (const n of sw.nodes) n.stop();
});

t.test('one worker that stops hearing the hub while its peers still do does not fail over', async (t) => {
  const sw = simSwarm(10, { seed: 17 });
  const deaf = sw.nodes[3]!;
  let at = sw.clock.now();
  const beat = () => {
    if (sw.clock.now() - at < 1000) return;
    at = sw.clock.now();
    for (const n of sw.nodes) if (n !== deaf || sw.clock.now() < 1_003_000) n.hub.heard();
  };
  await sw.runUntil(() => false, 15_000, 50, beat);
  t.equal(deaf.mode, 'star', 'no failover');
  t.ok(deaf.hub.stats.vetoed > 0, 'peers vetoed the suspicion');
  for (const n of sw.nodes) n.stop();
});

t.test('handing results back to a hub twice records each once', async (t) => {
  const { handBack } = await import('../../worker/gossip/handback.js');
  const sw = simSwarm(10, { seed: 21, taskMs: 20 });
  const specs = sw.seedTasks(100);
  await sw.allDone(100, 120_000);
  // A new hub with an empty store (exactly-once by task id, as the hub's TaskStore does).
  const tasks = new Set<string>();
  const results = new Map<string, string>();
  const sink = {
    has: (id: string) => tasks.has(id),
    submitMany: async (s: { id: string }[]) => { for (const x of s) tasks.add(x.id); },
    complete: async (id: string, r: { text: string }) => {
      if (!tasks.has(id)) return 'unknown' as const;
      if (results.has(id)) return 'duplicate' as const;
      results.set(id, r.text);
      return 'recorded' as const;
    },
  };
  const first = await handBack(sw.nodes[3]!.replica, sink);
  const second = await handBack(sw.nodes[8]!.replica, sink);
  t.same(first, { submitted: 100, recorded: 100, duplicate: 0, unknown: 0, skipped: 0, failures: 0 });
  t.same(second, { submitted: 0, recorded: 0, duplicate: 100, unknown: 0, skipped: 0, failures: 0 }, 'the second handback changes nothing');
  t.equal(results.size, specs.length, 'every result present once');
  // A sink that says what it has final is asked by id first: nothing it has is offered again.
  const third = await handBack(sw.nodes[5]!.replica, { ...sink, final: (id: string) => results.has(id) });
  t.same(third, { submitted: 0, recorded: 0, duplicate: 0, unknown: 0, skipped: 100, failures: 0 }, 'ids first: results the hub has final are not offered');
  for (const n of sw.nodes) n.stop();
});

t.test('hub returns: each worker hands back, the coordinator steps down, results recorded once', async (t) => {
  const { FailoverController } = await import('../../worker/gossip/failover.js');
  const sw = simSwarm(25, { seed: 23, taskMs: 200 });
  const specs = sw.seedTasks(500);
  // The new hub's store: exactly-once by task id.
  const hubResults = new Map<string, string>();
  let hubUp = false;
  const ctrls = sw.nodes.map((n) => new FailoverController(n, {
    handBack: async (entries) => {
      if (!hubUp) throw new Error('no hub');
      let recorded = 0, duplicate = 0;
      for (const e of entries) {
        if (!e.result) continue;
        if (hubResults.has(e.id)) duplicate++; else { hubResults.set(e.id, e.result.text!); recorded++; }
      }
      return { recorded, duplicate };
    },
  }));
  await sw.inGossip();
  await sw.runUntil(() => sw.nodes[0]!.replica.counts().done >= 200, 60_000, 50);
  t.ok(sw.nodes[0]!.coordinator.isCoordinating, 'w-000 coordinates in gossip mode');
  // A hub comes back mid-run: workers reconnect, hand back, return to star mode.
  hubUp = true;
  await Promise.all(ctrls.map((c) => c.hubConnected()));
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'every worker back in star mode');
  t.notOk(sw.nodes[0]!.coordinator.isCoordinating, 'the acting coordinator stepped down');
  const recorded = ctrls.reduce((a, c) => a + c.stats.recorded, 0);
  t.equal(recorded, hubResults.size, 'the hub recorded each handed-back result once');
  t.ok(hubResults.size >= 200, `${hubResults.size} results handed back`);
  t.ok(ctrls.reduce((a, c) => a + c.stats.duplicate, 0) > 0, 'offers of the same result from several workers were duplicates');
  for (const [id, text] of hubResults) if (text !== `echo: task ${Number(id.slice(2))}`) t.fail(`wrong text for ${id}`);
  t.ok(specs.length === 500);
  for (const n of sw.nodes) n.stop();
});

t.test('ids-first handback: only what the hub lacks is sent; a hub that dies mid-handback leaves the worker reconciling until a retry', async (t) => {
  const { FailoverController } = await import('../../worker/gossip/failover.js');
  const { sw } = await ranInGossip(10, 29, 200);
  // The restarted hub journaled the first 150 before it died (star-mode history); it lacks 50.
  const hubResults = new Map<string, string>();
  for (const id of sw.nodes[0]!.replica.ids().slice(0, 150)) hubResults.set(id, sw.nodes[0]!.replica.get(id)!.result!.text!);
  const lacked = new Set(sw.nodes[0]!.replica.ids().slice(150));
  let up = true;
  let dieAfterOffers = -1;
  let offers = 0;
  const sent: string[] = [];
  const link = {
    offer: async (ids: string[]) => {
      if (!up) throw new Error('no hub');
      if (offers++ === dieAfterOffers) up = false;
      return ids.filter((id) => !hubResults.has(id));
    },
    handBack: async (entries: { id: string; result?: { text?: string } }[]) => {
      if (!up) throw new Error('hub connection lost');
      let recorded = 0, duplicate = 0;
      for (const e of entries) {
        sent.push(e.id);
        if (!e.result) continue;
        if (hubResults.has(e.id)) duplicate++; else { hubResults.set(e.id, e.result.text!); recorded++; }
      }
      return { recorded, duplicate };
    },
  };
  // Every member offers everything it holds (no per-producer selection): 10 x 200 ids offered.
  const ctrls = sw.nodes.map((n) => new FailoverController(n, link, { offerChunk: 64, handbackChunk: 16 }));
  // The hub dies right after answering the first member's first offer: that member stays reconciling.
  dieAfterOffers = 0;
  await ctrls[0]!.hubConnected();
  t.equal(sw.nodes[0]!.mode, 'reconciling', 'a hub lost mid-handback leaves the worker reconciling');
  t.equal(ctrls[0]!.stats.handbacks, 0, 'no handback completed');
  // The hub is back: the member retries from the offer; then everyone reconciles.
  up = true; dieAfterOffers = -1;
  for (const c of ctrls) await c.hubConnected();
  t.ok(sw.nodes.every((n) => n.mode === 'star'), 'every worker back in star mode');
  t.equal(hubResults.size, 200, 'the hub has every result');
  t.ok(sent.every((id) => lacked.has(id)), 'only entries the hub lacked were sent');
  const offered = ctrls.reduce((a, c) => a + c.stats.offered, 0);
  const recorded = ctrls.reduce((a, c) => a + c.stats.recorded, 0);
  t.equal(recorded, 50, 'the 50 it lacked were recorded once');
  t.ok(offered >= 2000, `the history went over as ids (${offered} offered), ${sent.length} entries sent`);
  t.ok(sent.length < 200, 'entries sent are far fewer than the ids offered');
  for (const n of sw.nodes) n.stop();
});

t.test('a hub that does not take offers (no `want` in its ACK) gets every entry, as before', async (t) => {
  const { FailoverController } = await import('../../worker/gossip/failover.js');
  const { sw } = await ranInGossip(5, 31, 40);
  let sent = 0;
  const c = new FailoverController(sw.nodes[2]!, {
    offer: async () => undefined,
    handBack: async (entries) => { sent += entries.length; return { recorded: entries.length, duplicate: 0 }; },
  });
  await c.hubConnected();
  t.equal(sw.nodes[2]!.mode, 'star', 'back in star mode');
  t.equal(sent, 40, 'every final entry handed back');
  for (const n of sw.nodes) n.stop();
});

t.test('results the hub evicted and the replica forgot are not offered, and the handback goes on', async (t) => {
  const { FailoverController } = await import('../../worker/gossip/failover.js');
  const { sw } = await ranInGossip(5, 37, 40);
  const offered: string[] = [];
  let sent = 0;
  const node = sw.nodes[1]!;
  const c = new FailoverController(node, {
    offer: async (ids) => { offered.push(...ids); return ids; },
    handBack: async (entries) => { sent += entries.length; return { recorded: entries.length, duplicate: 0 }; },
  });
  // The hub's eviction notice (STATE `evicted`) arrives for half of them.
  const gone = node.replica.ids().slice(0, 20);
  c.evicted(gone);
  await c.hubConnected();
  t.equal(node.mode, 'star', 'back in star mode (no member crashed on a forgotten id)');
  t.equal(offered.length, 20, 'only what the replica still holds is offered');
  t.notOk(offered.some((id) => gone.includes(id)), 'no evicted id offered');
  t.equal(sent, 20);
  for (const n of sw.nodes) n.stop();
});
