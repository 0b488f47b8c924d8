import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * A holder that was in sync (complete mark) falls behind on one large submit and is resumed from its
 * mark. Tasks of that submit leased while the resume is under way must reach the holder with their
 * spec: a resume that walks the change log over several turns and stops at the version it began at
 * skipped a task whose last change (the lease) came after, and its lease went as a delta without its
 * spec, which gossip mode cannot run (300 of 300 held without it, in a version that did so).
 */

const pad = 'f'.repeat(2000);

t.test('tasks leased while a resume walks the change log reach the holder with their spec', async (t) => {
  const maxOutbound = 2 << 20;
  const { hub, addr, stop } = await startHub({ maxOutbound, deadAfterMs: 300_000 });
  const pool = new WorkerPool({ ids: ['rw-w1'], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => addr, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await stop(); });
  t.ok(await waitWorkers(hub, 1), 'the holder joined');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const all = () => [...hub.store.queue.all()].map((r) => r.id);
  const agree = () => { const r = replica(); return !!r && all().every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  const feed = () => hub.failover.feedViews()[0];
  t.ok(await until(() => !!feed() && !feed()!.syncing, 60_000), 'its first sync ended');
  clearInterval((hub.failover as unknown as { fullTimer?: NodeJS.Timeout }).fullTimer);

  // 2,700 tasks; the last 300 first in the queue (priority), so a worker leases them first.
  const N = 2700, LATE = 300;
  const big = Array.from({ length: N }, (_, i) => `rw-${i}`);
  await hub.submit(big.map((id, i) => ({ id, prompt: `${pad} ${id}`, role: 'x', priority: i >= N - LATE ? 5 : 0 })));
  // The flush waits whole past the bound: put the holder behind by hand, as a slow link would.
  if (hub.failover.stats.behindResumed === 0) {
    const feeds = (hub.failover as unknown as { feeds: Map<unknown, { behind(n: number): void }> }).feeds;
    [...feeds.values()][0]!.behind(0);
  }
  t.equal(hub.failover.stats.behindResumed, 1, 'the holder fell behind on the flush and is resumed from its mark');
  // In the turn the submit is answered (the resume's walk has read a chunk or two): a worker takes the last 300.
  const leased: string[] = [];
  for (let k = 0; k < LATE; k++) { const r = hub.store.lease({ id: 'ghost', role: 'x', caps: [] }); if (r) leased.push(r.id); }
  t.equal(leased.length, LATE, `${LATE} leased`);
  t.ok(await until(() => !feed()!.syncing && agree(), 60_000), 'the resume ended; the holder\'s states equal the hub\'s');
  // Frames still on the link may bring the rest: give them 15 s.
  await until(() => big.every((id) => replica()?.get(id)?.spec), 15_000);
  const noSpec = big.filter((id) => !replica()?.get(id)?.spec);
  const lost = big.filter((id) => !replica()?.get(id));
  t.equal(lost.length, 0, `lost 0 (${lost.length} not held at all)`);
  t.equal(noSpec.length, 0, `changed 0: every task held with its spec (${noSpec.length} held without, e.g. ${noSpec.slice(0, 3).join(', ')})`);
  // And when they finish, still without it.
  for (const id of leased) await hub.store.complete(id, { text: `echo ${id}`, worker: 'ghost', attempt: 1 });
  await hub.failover.flush();
  t.ok(await until(agree, 30_000), 'the results reached the holder');
  t.equal(leased.filter((id) => !replica()?.get(id)?.spec).length, 0, 'the finished ones held with their spec');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
});
