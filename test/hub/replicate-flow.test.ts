import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';

/**
 * Replication paces itself by the holder's socket: a state many times the link's outbound bound
 * goes out in chunks as the socket drains, so a holder is never cut for backpressure, neither by a
 * large submit (its deltas) nor by rejoining with an empty replica (a full sync).
 */

const N = 20_000;
const pad = 'p'.repeat(200);

function pool(addr: { host: string; port: number }, ids: string[]) {
  const p = new WorkerPool({ ids, driver: { name: 'echo', options: {} }, slots: 4, locate: async () => addr, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  return { p, done: p.run() };
}

async function until(fn: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!fn() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return fn();
}

t.test('a holder with a state far over the link\'s outbound bound takes a large submit and rejoins; tasks run once', async (t) => {
  // A 1 MiB outbound bound; the state is about 8 MB, more than loopback's socket buffers take at once.
  const { hub, addr, stop } = await startHub({ maxOutbound: 1024 * 1024 });
  let a = pool(addr, ['fl-1', 'fl-2']);
  t.teardown(async () => { await a.p.stop('test over'); await a.done; await stop(); });
  t.ok(await waitWorkers(hub, 2), 'the failover workers joined');
  t.same(hub.failover.holders(), ['fl-1']);

  const ids = Array.from({ length: N }, (_, i) => `fl-${i}`);
  const accepted = await hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}` })));
  t.equal(accepted.filter((r) => !r.duplicate).length, N, 'one submit of the whole batch is acknowledged');
  const finished = () => { const c = hub.store.queue.counts(); return c.done + c.failed; };
  t.ok(await until(() => finished() >= N, 60_000), 'and every task of it runs');
  const holder = () => a.p.agents[0]?.failover?.node.replica.counts() ?? { done: 0 };
  t.ok(await until(() => holder().done >= N, 60_000), `the holder's replica has every result (${holder().done})`);

  // The worker process dies and comes back with an empty replica: it is a holder again and gets the whole state.
  await a.p.stop('crash');
  await a.done;
  a = pool(addr, ['fl-1', 'fl-2']);
  t.ok(await until(() => hub.registry.size === 2 && [...hub.registry.all()].every((w) => a.p.agents.some((x) => x?.failover && hub.failover.isPeer(w))), 30_000), 'the restarted workers rejoined');
  t.ok(await until(() => holder().done >= N, 60_000), `the rejoined holder has the whole state again (${holder().done})`);
  const more = Array.from({ length: 200 }, (_, i) => `after-${i}`);
  await hub.submit(more.map((id) => ({ id, prompt: id })));
  t.ok(await until(() => finished() >= N + 200, 60_000), 'tasks submitted after the rejoin run');

  t.equal(hub.metrics.protocolErrors.get('SWARM_ERR_BACKPRESSURE') ?? 0, 0, 'no link was cut for backpressure');
  const lost = [...ids, ...more].filter((id) => hub.store.queue.get(id)?.state !== 'done').length;
  t.equal(lost, 0, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.ok(hub.failover.stats.fullSyncs >= 2, 'the rejoin was a full sync');
});
