import t from 'tap';
import { finishAsGhost, startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/**
 * A holder's link is cut (the hub lives on) in the middle of its whole-state sync, after the deltas
 * of tasks submitted while the sync was under way reached it. It reconnects to the same hub with its
 * last mark: the hub sends what the sync still owed and what changed since, not the tasks the
 * holder already had as deltas. A raw socket plays the holder, so the cut falls at an exact frame.
 * The tasks need a role no worker has: what goes down the link is replication only.
 */

const N0 = 4000;
const N1 = 1500;
const RUN = 100;
const pad = 'c'.repeat(2000);

interface Seen { entries: Map<string, Frame>; mark?: Frame; frames: number; sent: number }

/** What a STATE frame brings: its entries by id (the spec kept once seen), and its mark if it has one. */
function take(s: Seen, f: Frame): void {
  if (f.type !== 'STATE') return;
  s.frames++;
  for (const e of f.payload.entries as Frame[]) {
    s.sent++;
    const had = s.entries.get(e.id);
    s.entries.set(e.id, { ...had, ...e, spec: e.spec ?? had?.spec });
  }
  if (f.payload.sync) s.mark = f.payload.sync;
}

t.test('a holder reconnecting to the same hub after a cut gets what its sync still owed, not the tasks it has as deltas', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  const ids = Array.from({ length: N0 }, (_, i) => `rc-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  const hs = { worker_id: 'rc-holder', peer_addr: '127.0.0.1:9', host_id: 'host-rc', pid: 310_001, slots: 1 };

  const a = await RawWorker.connect(addr);
  t.teardown(() => a.destroy());
  const seenA: Seen = { entries: new Map(), frames: 0, sent: 0 };
  t.equal((await a.handshake(hs))?.type, 'HANDSHAKE_ACK', 'the holder joined');
  // It reads nothing for now: the hub's sync fills the socket and waits for it to drain.
  a.sock.pause();
  const feed = () => hub.failover.feedViews()[0];
  t.ok(await until(() => !!feed()?.syncing && feed()!.frames > 0, 20_000), 'its whole-state sync is under way');
  await new Promise((r) => setTimeout(r, 300));
  t.ok(feed()?.syncing, 'and still is, waiting for the holder to read');

  // Tasks submitted while the sync is under way: they go as deltas, queued behind what is in flight.
  const more = Array.from({ length: N1 }, (_, i) => `rc-new-${i}`);
  await hub.submit(more.map((id) => ({ id, prompt: `new ${id}`, role: 'x' })));
  const fresh = new Set(more);
  let freshSeen = 0;
  let cut = false;
  let markAtCut: Frame | undefined;
  a.onFrame = (f) => {
    if (cut) return;
    take(seenA, f);
    if (f.type === 'STATE') for (const e of f.payload.entries as Frame[]) if (fresh.delete(e.id)) freshSeen++;
    // Every new task reached it, and its sync is not over: the link goes now.
    if (freshSeen === N1 && seenA.mark?.seq !== undefined) { cut = true; markAtCut = seenA.mark; a.sock.destroy(); }
  };
  a.sock.resume();
  t.ok(await until(() => cut || a.closed, 30_000), 'the link was cut');
  t.ok(cut, `cut after all ${N1} new tasks arrived as deltas, mid-sync (mark ${JSON.stringify(markAtCut)})`);
  const had = new Set([...seenA.entries].filter(([, e]) => e.spec).map(([id]) => id));
  t.ok(had.size < N0 + N1, `before the cut it held ${had.size} of ${N0 + N1} tasks`);

  // The hub sees the link gone; tasks the holder had finish while it is away.
  t.ok(await until(() => hub.failover.holders().length === 0, 10_000), 'the hub saw the link go');
  const finished = new Set(await finishAsGhost(hub, RUN));
  t.equal([...finished].filter((id) => had.has(id)).length, RUN, `${RUN} tasks it had finished meanwhile`);
  // It comes back with its last mark.
  const b = await RawWorker.connect(addr);
  t.teardown(() => b.destroy());
  const seenB: Seen = { entries: new Map(), frames: 0, sent: 0 };
  b.onFrame = (f) => take(seenB, f);
  t.equal((await b.handshake({ ...hs, sync: markAtCut }))?.type, 'HANDSHAKE_ACK', 'it rejoined with its mark');
  // The resumed sync ends with a frame that says the copy is complete (a mark with no position).
  const done = await b.next((f) => f.type === 'STATE' && f.payload.sync && f.payload.sync.seq === undefined && f.payload.parts !== undefined, 30_000);
  t.ok(done, 'the resumed sync ended');
  t.equal(hub.failover.stats.resumedSyncs, 1, 'resumed, not synced again from zero');

  // Counted by task: what the second link brought that the holder had (resent), and what it lacked.
  const resent = [...seenB.entries.keys()].filter((id) => had.has(id) && !finished.has(id)).length;
  const owed = [...ids, ...more].filter((id) => !had.has(id));
  t.comment(`second link: ${seenB.sent} entries in ${seenB.frames} frames; ${resent} of them tasks the holder had unchanged; ${owed.length} owed, ${RUN} changed since`);
  t.equal(resent, 0, 'resent 0: nothing the holder already had unchanged came again');
  t.equal([...finished].filter((id) => seenB.entries.get(id)?.result?.text !== `echo: ${pad} ${id}`).length, 0, 'each task finished since came with its result');
  const lost = owed.filter((id) => !seenB.entries.get(id)?.spec);
  t.equal(lost.length, 0, 'lost 0: every task it lacked came, with its spec');
  t.equal(seenB.sent, seenB.entries.size, 'duplicated 0: no task twice on the second link');
  const changed = [...ids, ...more].filter((id) => {
    const e = seenB.entries.get(id)?.spec ? seenB.entries.get(id) : seenA.entries.get(id);
    return e?.spec?.prompt !== hub.store.queue.get(id)?.spec.prompt;
  });
  t.equal(changed.length, 0, 'changed 0: the copy holds every spec as the hub does');
});
