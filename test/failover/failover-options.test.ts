import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { Mode } from '../../worker/gossip/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';

/**
 * After a failover the acting coordinator leases and retries by the swarm's options, as the hub
 * did: the hub's --max-attempts (not the built-in 3) and each member's own slot count (not one each).
 */
t.test('after a failover, --max-attempts 5 and the members\' slot counts hold', async (t) => {
  const { hub, addr, stop } = await startHub({ maxAttempts: 5, leaseMs: 5000 });
  // Every run fails after 400 ms: each task uses all its attempts, and runs overlap long enough to count.
  const pool = new WorkerPool({
    ids: ['mo-1', 'mo-2'], driver: { name: 'echo', options: { latency_ms: '400', fail: '1' } }, slots: 2, locate: async () => addr,
    failover: { host: '127.0.0.1', port: 0 },
  }, quiet);
  const done = pool.run();
  let hubStopped = false;
  t.teardown(async () => { await pool.stop('test over'); await done; if (!hubStopped) await stop(); });
  t.ok(await waitWorkers(hub, 2), 'both failover workers joined');
  const agents = pool.agents.map((a) => a!.failover!);
  const joined = Date.now() + 10_000;
  while (agents.some((a) => a.node.coordinator.taskRules.defaultMaxAttempts !== 5) && Date.now() < joined) await new Promise((r) => setTimeout(r, 20));
  t.same(agents.map((a) => a.node.coordinator.taskRules), [{ defaultMaxAttempts: 5, leaseMs: 5000 }, { defaultMaxAttempts: 5, leaseMs: 5000 }], 'the hub\'s rules reached every member');

  const ids = ['mo-a', 'mo-b', 'mo-c', 'mo-d'];
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  // The hub dies while the first attempts run: the rest are the acting coordinator's.
  const leased = Date.now() + 10_000;
  while (ids.some((id) => hub.store.queue.get(id)?.state !== 'leased') && Date.now() < leased) await new Promise((r) => setTimeout(r, 5));
  t.ok(ids.every((id) => hub.store.queue.get(id)!.attempts <= 1), 'the hub ran at most the first attempt of each');
  // The hub dies once its holder has the tasks (a destroyed link drops what it had not written yet).
  const held = Date.now() + 10_000;
  while (agents[0]!.node.replica.counts().leased < ids.length && Date.now() < held) await new Promise((r) => setTimeout(r, 5));
  hubStopped = true;
  await hub.stop({ killWorkers: false }); // the hub goes away; its workers are not told to stop

  const gossip = Date.now() + 20_000;
  while (agents.some((a) => a.mode !== Mode.GOSSIP) && Date.now() < gossip) await new Promise((r) => setTimeout(r, 50));
  t.ok(agents.every((a) => a.mode === Mode.GOSSIP), 'both members are in gossip mode');
  const acting = agents.find((a) => a.node.coordinator.isCoordinating) ?? agents[0]!;
  let peak = 0;
  const end = Date.now() + 40_000;
  const final = () => ids.every((id) => { const e = acting.node.replica.get(id); return !!(e?.result || e?.failure); });
  while (!final() && Date.now() < end) {
    // Leases the acting coordinator handed out itself (the hub's first ones it only renews).
    const running = ids.filter((id) => { const l = acting.node.replica.get(id)?.lease; return l && !l.revoked && l.attempt >= 2 && !acting.node.replica.get(id)?.failure; }).length;
    peak = Math.max(peak, running);
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(final(), 'every task ended in gossip mode');
  t.equal(peak, 4, 'two members of two slots each ran four tasks at once');
  for (const id of ids) {
    const e = acting.node.replica.get(id)!;
    t.equal(e.failure?.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED', `${id} failed for good`);
    t.equal((e.failure?.attempt ?? 0) - (e.lease?.unrun ?? 0), 5, `${id} used the hub's 5 attempts, not 3`);
  }
});
