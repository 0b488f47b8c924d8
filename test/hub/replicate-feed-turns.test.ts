import t from 'tap';
import pino from 'pino';
import type { Payload, ReplicaEntry } from '../../protocol/index.js';
import { HolderFeed, type FeedLink } from '../../hub/replicate-feed.js';
import { chunks } from '../../hub/replicate-chunks.js';
import type { TaskRecord } from '../../hub/task.js';
import { WorkerPool } from '../../worker/index.js';
import { FaultNet } from '../helpers/fault-proxy.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * A feed sends the deltas queued for a holder as fast as its link takes them; only a sync's chunks
 * (built, signed and encoded as it goes) are held to a budget per turn of the event loop. Counted
 * against that budget, deltas left at 256 KiB a turn whatever the link took, and at load a hub's turn
 * lasts 0.3-1 s and brings more (a 500-task submit is 1.6 MB of specs): in the soak every holder fell
 * past the bound together, about once a second each, its socket writable all along, and was synced.
 */

const log = pino({ level: 'silent' });
const CHUNK = 8 * 1024;
const TURN = 16 * 1024;
const pad = 'a'.repeat(500);
const nextTurn = () => new Promise<void>((r) => setImmediate(r));

function records(n: number, from = 0): TaskRecord[] {
  return Array.from({ length: n }, (_, k) => { const i = from + k; return { id: `t-${i}`, spec: { id: `t-${i}`, prompt: `${pad} ${i}`, priority: 0 }, state: 'queued', attempts: 0, submittedAt: 0, seq: i } as TaskRecord; });
}
const entry = (r: TaskRecord): ReplicaEntry => ({ id: r.id, spec: r.spec, seq: r.seq }) as ReplicaEntry;

/**
 * A link that takes more while `writable` (the test stalls it: a holder that stopped reading), recording
 * what arrives and, per turn, the sync characters.
 */
function link() {
  const copy = new Map<string, ReplicaEntry>();
  let turn = 0;
  let writable = true;
  let drain: (() => void)[] = [];
  const syncPerTurn = new Map<number, number>();
  const l: FeedLink = {
    send: (p: Payload<'STATE'>, json: string) => { for (const e of p.entries) copy.set(e.id, e); if (p.full) syncPerTurn.set(turn, (syncPerTurn.get(turn) ?? 0) + json.length); },
    get writable() { return writable; },
    drained: () => (writable ? Promise.resolve() : new Promise<void>((r) => drain.push(r))),
    isClosed: false,
  };
  const stall = (on: boolean) => { writable = !on; if (!on) { const d = drain; drain = []; for (const r of d) r(); } };
  return { l, copy, syncPerTurn, stall, next: () => { turn++; } };
}

t.test('once the link drains, the deltas waiting and those of each long turn after go at once: no overflow, no sync', async (t) => {
  const k = link();
  const feed = new HolderFeed(k.l, entry, () => [], { chunkBytes: CHUNK, maxBacklog: 256 * 1024, turnBytes: TURN, log });
  // The holder stops reading while ~110 KiB of deltas queue (under the bound), then reads again.
  k.stall(true);
  const first = records(200);
  feed.flush(chunks(first.map(entry), CHUNK, log));
  t.equal(k.copy.size, 0, 'nothing sent while the link is full');
  k.stall(false);
  await Promise.resolve();
  const TURNS = 40, PER_TURN = 300; // ~160 KiB of deltas a turn: 10x the sync budget, under the 256 KiB bound
  let from = first.length;
  let lateTurns = 0;
  for (let i = 0; i < TURNS; i++) {
    const recs = records(PER_TURN, from);
    from += PER_TURN;
    feed.flush(chunks(recs.map(entry), CHUNK, log));
    // Before the turn ends: every delta of this turn is on the link.
    if (!recs.every((r) => k.copy.has(r.id))) lateTurns++;
    await nextTurn();
    k.next();
  }
  t.equal(lateTurns, 0, 'every turn\'s deltas were sent in that turn');
  t.equal(k.copy.size, from, `the holder got all ${from} tasks`);
  t.equal(feed.stats.overflows, 0, 'never past the bound (before: after the stall the feed sent 16 KiB a turn, and the backlog passed 256 KiB in the first turn)');
  t.equal(feed.stats.syncs, 0, 'no sync');
});

t.test('a sync under way keeps its budget per turn while the deltas beside it go at once', async (t) => {
  const k = link();
  const state = records(2000);
  const feed = new HolderFeed(k.l, entry, () => state, { chunkBytes: CHUNK, maxBacklog: 256 * 1024, turnBytes: TURN, log });
  feed.startSync();
  let from = 2000, lateTurns = 0;
  for (let i = 0; i < 10_000 && feed.syncing; i++) {
    const recs = records(100, from);
    from += 100;
    feed.flush(chunks(recs.map(entry), CHUNK, log));
    if (!recs.every((r) => k.copy.has(r.id))) lateTurns++;
    await nextTurn();
    k.next();
  }
  t.notOk(feed.syncing, 'the sync ended');
  t.equal(lateTurns, 0, 'the deltas went in the turn they came');
  // From the second turn: the first also carries what the sync sent before the first yield.
  const most = Math.max(...[...k.syncPerTurn].filter(([turn]) => turn > 0).map(([, n]) => n));
  t.ok(most <= TURN + CHUNK + 1024, `sync characters in one turn: at most ${most} (budget ${TURN}, one chunk may start under it)`);
  t.ok(k.syncPerTurn.size >= 2000 * 500 / (TURN + CHUNK), `the sync took ${k.syncPerTurn.size} turns`);
  t.equal(state.filter((r) => k.copy.get(r.id)?.spec).length, state.length, 'the holder has every task of the sync with its spec');
  t.equal(k.copy.size, from, 'and every task sent as a delta');
  t.equal(feed.stats.overflows, 0, 'never past the bound');
});

t.test('a holder that stops reading for a while catches up by deltas; past the bound, by a sync resumed from its mark', async (t) => {
  // 2 MiB outbound: the bound on a holder's deltas is 512 KiB.
  const { hub, addr, stop } = await startHub({ maxOutbound: 2 << 20, deadAfterMs: 300_000 });
  const net = new FaultNet();
  const proxy = await net.wrap(`${addr.host}:${addr.port}`);
  const [host, port] = [proxy.slice(0, proxy.lastIndexOf(':')), Number(proxy.slice(proxy.lastIndexOf(':') + 1))];
  const ids = Array.from({ length: 2500 }, (_, i) => `ft-${i}`);
  // Role `x`: the holder does not run them, a ghost does, so what goes down its link is replication.
  await hub.submit(ids.map((id) => ({ id, prompt: `${'c'.repeat(2000)} ${id}`, role: 'x' })));
  // The ghost's results: 2 KB while the holder stalls briefly, 16 KB to pass the bound.
  const texts = new Map<string, string>();
  const finish = async (n: number, size: number) => {
    let k = 0;
    for (; k < n; k++) {
      const rec = hub.store.lease({ id: 'ghost', role: 'x', caps: [] });
      if (!rec) break;
      const text = `${'r'.repeat(size)} ${rec.id}`;
      texts.set(rec.id, text);
      await hub.store.complete(rec.id, { text, worker: 'ghost', attempt: rec.attempts });
    }
    return k;
  };
  const pool = new WorkerPool({ ids: ['ft-w1'], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => ({ host, port }), failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await net.close(); await stop(); });
  t.ok(await waitWorkers(hub, 1), 'the holder joined');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const agree = () => { const r = replica(); return !!r && ids.every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  t.ok(await until(() => hub.failover.feedViews().length === 1 && !hub.failover.feedViews()[0]!.syncing && agree(), 60_000), 'its first sync ended with its copy equal to the hub\'s');
  // No periodic repair window from here on: what the holder gets is what its feed sends for it.
  clearInterval((hub.failover as unknown as { fullTimer?: NodeJS.Timeout }).fullTimer);
  const synced0 = hub.failover.feedViews()[0]!.synced;
  const overflows = () => hub.failover.feedViews()[0]!.overflows;
  const behind = () => hub.failover.stats.behindResumed + hub.failover.stats.behindRestarted;

  // A bounded stall: 150 results (~320 KB of deltas) while it reads nothing for half a second.
  net.pauseAfter(proxy, net.down(proxy) + 1);
  let ran = await finish(150, 2000);
  await new Promise((r) => setTimeout(r, 500));
  t.ok(net.isPaused(), 'the holder stopped reading');
  net.unpause();
  t.ok(await until(agree, 60_000), 'it caught up: its copy equals the hub\'s');
  t.equal(overflows(), 0, 'never past the bound: no deltas dropped');
  t.equal(behind(), 0, 'no sync to catch up: every change came as a delta');

  // Past the bound: it reads nothing while results of 16 KB come until its deltas are dropped. How
  // many that takes is the kernel's: the loopback buffers between the hub and the stalled reader took
  // 6 MB of results before the hub's socket stopped draining. Bounded by the tasks and by time.
  net.pauseAfter(proxy, net.down(proxy) + 1);
  for (const t0 = Date.now(); ran < ids.length && behind() < 1 && Date.now() - t0 < 60_000;) {
    const n = await finish(50, 16_000);
    if (!n) break;
    ran += n;
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(await until(() => behind() >= 1, 30_000), `its deltas passed the bound and were dropped (${ran} tasks finished)`);
  net.unpause();
  // Before, the first chunk of a flush split in two carried the flush's version: sent while the second
  // waited, then dropped, it had the holder resume from past that second chunk, which no repair
  // window brought here.
  t.ok(await until(agree, 30_000), 'its copy equals the hub\'s again, by the sync resumed from its mark');
  t.equal(hub.failover.stats.behindRestarted, 0, 'never synced from zero');
  t.equal(hub.failover.stats.rescans, 0, 'what changed since its mark came from the change log, not a pass over the hot state');
  t.ok(hub.failover.stats.behindResumed >= 1, `resumed from its mark ${hub.failover.stats.behindResumed} time(s)`);
  const f2 = hub.failover.feedViews()[0]!;
  t.ok(f2.bare > 0, `what it had went without its spec: ${f2.bare} of ${f2.synced - synced0} entries synced`);

  const done = ids.filter((id) => hub.store.queue.get(id)?.state === 'done');
  t.equal(done.length, ran, 'lost 0: every finished task is recorded');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.equal(done.filter((id) => replica()?.get(id)?.result?.text !== texts.get(id)).length, 0, 'changed 0: the copy holds each result as recorded');
});

/** A feed (64 KiB bound) on a link that takes `take(n)` more frames, then waits: a holder reading a little at a time. */
function readingFeed(): { copy: Map<string, ReplicaEntry>; take: (n: number) => Promise<void>; feed: HolderFeed; send: (recs: TaskRecord[]) => void } {
  const copy = new Map<string, ReplicaEntry>();
  let budget = 0;
  let drain: (() => void)[] = [];
  const l: FeedLink = {
    send: (p: Payload<'STATE'>) => { budget--; for (const e of p.entries) copy.set(e.id, e); },
    get writable() { return budget > 0; },
    drained: () => (budget > 0 ? Promise.resolve() : new Promise<void>((r) => drain.push(r))),
    isClosed: false,
  };
  const take = async (n: number) => { budget = n; const d = drain; drain = []; for (const r of d) r(); await nextTurn(); };
  const feed = new HolderFeed(l, entry, () => [], { chunkBytes: CHUNK, maxBacklog: 64 * 1024, turnBytes: TURN, log });
  return { copy, take, feed, send: (recs) => feed.flush(chunks(recs.map(entry), CHUNK, log)) };
}

t.test('a flush over the bound larger than the one let past before takes its place: no overflow', async (t) => {
  const { copy, take, feed, send } = readingFeed();
  send(records(150)); // ~80 KiB: past the 64 KiB bound alone, let past whole
  t.equal(feed.stats.oversize, 1, 'the first flush went past the bound whole');
  await take(6); // the holder reads part of it
  send(records(20, 150)); // ~10 KiB beside it: under the bound
  send(records(400, 170)); // ~210 KiB, more than all that waits: it takes the first one's place
  t.equal(feed.stats.overflows, 0, 'never behind (before: the second large flush dropped everything and synced)');
  t.equal(feed.stats.oversize, 2, 'the second one let past in the first one\'s place');
  for (let i = 0; i < 1000 && copy.size < 570; i++) await take(Infinity);
  t.equal(copy.size, 570, 'the holder got every task');
  t.equal(feed.stats.syncs, 0, 'no sync');
});

t.test('a flush under the bound that piles past it puts the holder behind then, not the large flush after it', async (t) => {
  const { copy, take, feed, send } = readingFeed();
  send(records(40)); // ~21 KiB waiting (the link takes nothing)
  send(records(100, 40)); // ~52 KiB: under the bound alone, past it with what waits
  t.same([feed.stats.overflows, feed.stats.oversize], [1, 0], 'behind at the flush that piled past the bound (it took no place past the bound)');
  const syncs = feed.stats.syncs;
  send(records(2000, 140)); // ~1 MiB, over the bound: let past whole
  t.same([feed.stats.overflows, feed.stats.oversize, feed.stats.syncs], [1, 1, syncs], 'the large flush after it went whole: no second overflow, no sync for it');
  for (let i = 0; i < 2000 && copy.size < 2140; i++) await take(Infinity);
  t.ok(copy.size >= 2000, `the holder got the large flush (${copy.size} tasks)`);
});
