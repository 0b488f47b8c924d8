import t, { type Test } from 'tap';
import type { Hub } from '../../hub/index.js';
import { WorkerPool } from '../../worker/index.js';
import { FaultNet } from '../helpers/fault-proxy.js';
import { finishAsGhost, quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * One submit ten times a holder's bound on queued deltas (a `swarm submit` of many tasks, one HTTP
 * POST) is one flush: every chunk of it was queued to the holder's feed at once, the backlog passed
 * the bound within the flush, and the holder was resumed; the chunks after that overflowed again, and
 * each resume rescanned the hot state. A synced holder took 36-42 resumes for one 32 MB submit. The
 * tasks need a role the holder lacks, so what goes down its link is replication; the test finishes them.
 */

const BASE = 500;
const pad = 'f'.repeat(2000);

/**
 * A hub with a 2 MiB outbound bound (a holder's queued deltas 512 KiB, a chunk 256 KiB) and one
 * holder (worker `id`), after `before` ran on the hub; the holder's copy and feed, and whether they
 * equal the hub's.
 */
async function holderBed(t: Test, id: string, before?: (hub: Hub) => Promise<unknown>) {
  const maxOutbound = 2 << 20;
  const { hub, addr, stop } = await startHub({ maxOutbound, deadAfterMs: 300_000 });
  await before?.(hub);
  const pool = new WorkerPool({ ids: [id], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => addr, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await stop(); });
  const joined = await waitWorkers(hub, 1);
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const all = () => [...hub.store.queue.all()].map((r) => r.id);
  const agree = () => { const r = replica(); return !!r && all().every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  const feed = () => hub.failover.feedViews()[0];
  return { hub, bound: maxOutbound / 4, joined, replica, agree, feed };
}

t.test('one flush ten times the bound reaches a synced holder in bounded pieces: no resume, no rescan', async (t) => {
  const first = Array.from({ length: BASE }, (_, i) => `bf-${i}`);
  const { hub, bound, joined, replica, agree, feed } = await holderBed(t, 'bf-w1', (hub) => hub.submit(first.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' }))));
  t.ok(joined, 'the holder joined');
  t.ok(await until(() => !!feed() && !feed()!.syncing && agree(), 60_000), 'its first sync ended with its copy equal to the hub\'s');
  // No periodic repair window from here on: what the holder gets is what its feed sends for it.
  clearInterval((hub.failover as unknown as { fullTimer?: NodeJS.Timeout }).fullTimer);
  const f0 = feed()!;
  const behind = () => hub.failover.stats.behindResumed + hub.failover.stats.behindRestarted;

  // One submit of 2,700 tasks of 2 KB: one flush of ~5.5 MB, ten times the bound.
  const big = Array.from({ length: 2700 }, (_, i) => `bf-big-${i}`);
  const specs = big.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' }));
  const flushChars = specs.reduce((n, s) => n + JSON.stringify(s).length, 0);
  t.ok(flushChars >= 10 * bound, `the flush is ${flushChars} characters, ${(flushChars / bound).toFixed(1)}x the bound`);
  const deltas0 = hub.failover.stats.deltas;
  await hub.submit(specs);
  t.equal(hub.failover.stats.deltas - deltas0, big.length, 'the submit went out as one flush');
  t.ok(await until(agree, 60_000), 'the holder\'s copy equals the hub\'s');
  const f1 = feed()!;
  t.equal(behind(), 0, `no resume: the flush went in bounded pieces (${hub.failover.stats.behindResumed} resumed, ${hub.failover.stats.behindRestarted} restarted)`);
  t.equal(f1.overflows - f0.overflows, 0, 'its deltas were never dropped');
  t.equal(f1.syncs - f0.syncs, 0, 'no sync');
  t.equal(hub.failover.stats.rescans, 0, 'the hot state was not rescanned for a resume');
  t.ok(f1.oversize - f0.oversize >= 1 && f1.backlog === 0, `it went whole past the bound (${f1.oversize - f0.oversize} such flush), nothing waits now; the link was waited for ${f1.waits - f0.waits} times`);
  t.equal(big.filter((id) => !replica()?.get(id)?.spec).length, 0, 'every new task reached the holder with its spec');

  // Then they run (a ghost finishes them) and the holder follows by deltas.
  let ran = 0;
  for (const t0 = Date.now(); ran < BASE + big.length && Date.now() - t0 < 60_000;) {
    const n = (await finishAsGhost(hub, 500)).length;
    if (!n) break;
    ran += n;
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(await until(agree, 60_000), 'after they ran, the holder\'s copy still equals the hub\'s');
  const ids = [...first, ...big];
  const done = ids.filter((id) => hub.store.queue.get(id)?.state === 'done');
  t.equal(done.length, ids.length, 'lost 0: every task is recorded done');
  t.equal(ran, ids.length, 'each finished once');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.equal(done.filter((id) => replica()?.get(id)?.result?.text !== `echo: ${pad} ${id}`).length, 0, 'changed 0: the copy holds each result as recorded');
  t.ok(behind() <= 1, `at most one resume in all (${behind()})`);
});

t.test('a holder that stops reading in the middle of a large flush resumes from the chunk it reached, not from before the flush', async (t) => {
  const maxOutbound = 2 << 20;
  const { hub, addr, stop } = await startHub({ maxOutbound, deadAfterMs: 300_000 });
  const net = new FaultNet();
  const proxy = await net.wrap(`${addr.host}:${addr.port}`);
  const [host, port] = [proxy.slice(0, proxy.lastIndexOf(':')), Number(proxy.slice(proxy.lastIndexOf(':') + 1))];
  const pool = new WorkerPool({ ids: ['bm-w1'], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => ({ host, port }), failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await net.close(); await stop(); });
  t.ok(await waitWorkers(hub, 1), 'the holder joined');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const all = () => [...hub.store.queue.all()].map((r) => r.id);
  const agree = () => { const r = replica(); return !!r && all().every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  const feed = () => hub.failover.feedViews()[0];
  t.ok(await until(() => !!feed() && !feed()!.syncing, 60_000), 'its first sync ended');
  clearInterval((hub.failover as unknown as { fullTimer?: NodeJS.Timeout }).fullTimer);
  const behind = () => hub.failover.stats.behindResumed + hub.failover.stats.behindRestarted;

  // 10,000 tasks of 2 KB in one submit: a 21 MB flush. The holder stops reading 1 MB into it; the
  // loopback buffers take a few MB more, and the rest waits in its feed, past the bound, whole.
  const big = Array.from({ length: 10_000 }, (_, i) => `bm-${i}`);
  net.pauseAfter(proxy, net.down(proxy) + (1 << 20));
  await hub.submit(big.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  t.ok(await until(() => net.isPaused(), 30_000), 'the holder stopped reading in the middle of the flush');
  t.equal(behind(), 0, 'the flush alone did not put it behind');
  // Results in flushes of their own until what waits beside the flush passes the bound.
  let ran = 0;
  for (const t0 = Date.now(); behind() < 1 && Date.now() - t0 < 30_000;) {
    const n = (await finishAsGhost(hub, 50)).length;
    if (!n) break;
    ran += n;
    hub.failover.flush();
    await new Promise((r) => setTimeout(r, 10));
  }
  t.equal(behind(), 1, `then it fell behind (${ran} results)`);
  const synced0 = feed()!.synced;
  net.unpause();
  t.ok(await until(agree, 60_000), 'its copy equals the hub\'s');
  const resent = feed()!.synced - synced0;
  // From the version before the flush, the resume sent every task of it again and the results.
  t.ok(resent < big.length * 0.9, `the resume sent ${resent} entries, not the flush's ${big.length} again (and ${ran} results)`);
  t.equal(hub.failover.stats.behindRestarted, 0, 'never synced from zero');
  t.equal(hub.failover.stats.rescans, 0, 'no pass over the hot state');
  t.equal(big.filter((id) => !replica()?.get(id)?.spec).length, 0, 'every task reached the holder with its spec');
  const done = big.filter((id) => hub.store.queue.get(id)?.state === 'done');
  t.equal(done.length, ran, 'lost 0: every finished task is recorded');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.equal(done.filter((id) => replica()?.get(id)?.result?.text !== `echo: ${pad} ${id}`).length, 0, 'changed 0: the copy holds each result as recorded');
});

/**
 * A holder that was in sync (complete mark) falls behind on one large submit and is resumed from its
 * mark. Tasks of that submit leased while the resume is under way must reach the holder with their
 * spec: a resume that walks the change log over several turns and stops at the version it began at
 * skipped a task whose last change (the lease) came after, and its lease went as a delta without its
 * spec, which gossip mode cannot run (300 of 300 held without it, in a version that did so).
 */
t.test('tasks leased while a resume walks the change log reach the holder with their spec', async (t) => {
  const { hub, joined, replica, agree, feed } = await holderBed(t, 'rw-w1');
  t.ok(joined, 'the holder joined');
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
