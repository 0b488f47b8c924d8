import t from 'tap';
import pino from 'pino';
import type { Payload, ReplicaEntry } from '../../protocol/index.js';
import { HolderFeed, TurnShare, type FeedLink } from '../../hub/replicate-feed.js';
import { chunks } from '../../hub/replicate-chunks.js';
import type { TaskRecord } from '../../hub/task.js';

/**
 * A restarted hub syncs its holders and keepers at once. With a budget per feed, each turn of the
 * event loop carried a chunk for every one of them, and every I/O hop of the first tasks after the
 * restart (a submit, a dispatch, a result) waited behind all of them. The feeds now share one budget
 * a turn: five syncs together send about what one did per turn, take turns, and each holder still
 * gets every task, and the deltas in between.
 */

const log = pino({ level: 'silent' });
const CHUNK = 8 * 1024;
const pad = 'a'.repeat(500);

function records(n: number): TaskRecord[] {
  return Array.from({ length: n }, (_, i) => ({ id: `t-${i}`, spec: { id: `t-${i}`, prompt: `${pad} ${i}`, priority: 0 }, state: 'queued', attempts: 0, submittedAt: 0, seq: i }) as TaskRecord);
}
const entry = (r: TaskRecord): ReplicaEntry => ({ id: r.id, spec: r.spec, seq: r.seq }) as ReplicaEntry;

/** `feeds` holders syncing `recs` at once over links that always take more; per turn of the loop, the sync characters all of them sent. */
async function syncAll(feeds: number, recs: TaskRecord[], share?: TurnShare) {
  let turn = 0, over = false;
  const tick = () => { turn++; if (!over) setImmediate(tick); };
  setImmediate(tick);
  const perTurn = new Map<number, number>();
  const copies: Map<string, ReplicaEntry>[] = [];
  const fs = Array.from({ length: feeds }, () => {
    const copy = new Map<string, ReplicaEntry>();
    copies.push(copy);
    const link: FeedLink = {
      send: (p: Payload<'STATE'>, json: string) => { for (const e of p.entries) copy.set(e.id, e); if (p.full) perTurn.set(turn, (perTurn.get(turn) ?? 0) + json.length); },
      writable: true, drained: async () => {}, isClosed: false,
    };
    return new HolderFeed(link, entry, () => recs, { chunkBytes: CHUNK, maxBacklog: 1 << 30, turnBytes: 4 * CHUNK, share, log });
  });
  for (const f of fs) f.startSync();
  // A delta while the syncs run: it goes to every holder whatever the budget.
  const late = records(recs.length + 1).slice(-1).map((r) => ({ ...r, id: 'late' }));
  const cs = chunks(late.map(entry), CHUNK, log);
  for (const f of fs) f.flush(cs);
  for (let i = 0; i < 10_000 && fs.some((f) => f.syncing); i++) await new Promise((r) => setImmediate(r));
  over = true;
  return { perTurn: [...perTurn.values()], copies, done: fs.every((f) => !f.syncing) };
}

t.test('five syncs at once share one budget a turn, and each holder gets the whole state', async (t) => {
  const recs = records(2000);
  const alone = await syncAll(5, recs);
  const shared = await syncAll(5, recs, new TurnShare(4 * CHUNK));
  t.ok(alone.done && shared.done, 'every sync ended');
  const most = (xs: number[]) => Math.max(...xs);
  t.ok(most(alone.perTurn) > 5 * 3 * CHUNK, `a budget per feed: up to ${most(alone.perTurn)} characters of sync in one turn`);
  // One chunk may start under the budget and go whole.
  t.ok(most(shared.perTurn) <= 5 * CHUNK + 1024, `one budget shared: at most ${most(shared.perTurn)} characters in one turn`);
  for (const [i, copy] of shared.copies.entries()) {
    t.equal(recs.filter((r) => copy.get(r.id)?.spec).length, recs.length, `holder ${i} has every task with its spec`);
    t.ok(copy.has('late'), `holder ${i} has the delta sent while its sync ran`);
  }
});
