import t from 'tap';
import pino from 'pino';
import type { Payload, ReplicaEntry } from '../../protocol/index.js';
import { HolderFeed, type FeedLink } from '../../hub/replicate-feed.js';
import { chunks } from '../../hub/replicate-chunks.js';
import type { TaskRecord } from '../../hub/task.js';

/**
 * A holder's whole-state sync covers the tasks there when it starts; while it is under way, the changes
 * to those it has not reached are left to it (it reads each task when it gets there), and the tasks
 * submitted since go as deltas, specs at once, never again by the sync. The holder's copy ends equal
 * to the store. A repair window (not the whole state) skips nothing.
 */

const log = pino({ level: 'silent' });
const pad = 'a'.repeat(1000);

function setup() {
  const store = new Map<string, TaskRecord>();
  let seq = 0;
  const add = (id: string) => {
    const rec: TaskRecord = { id, spec: { id, prompt: `${pad} ${id}`, priority: 0 }, state: 'queued', attempts: 0, submittedAt: 0, seq: seq++ };
    store.set(id, rec);
    return rec;
  };
  const entry = (rec: TaskRecord, withSpec: boolean): ReplicaEntry => ({
    id: rec.id, ...(withSpec ? { spec: rec.spec, seq: rec.seq } : {}),
    ...(rec.result ? { result: { worker: rec.result.worker, attempt: rec.result.attempt, text: rec.result.text } } : {}),
  }) as ReplicaEntry;
  // The holder: entries merged by id, as the replica merges them (later fields win).
  const copy = new Map<string, Record<string, unknown>>();
  /** How many times each task's spec was sent. */
  const specs = new Map<string, number>();
  let allowance = Infinity;
  let release: (() => void) | undefined;
  const link: FeedLink = {
    send: (p: Payload<'STATE'>) => { allowance--; for (const e of p.entries) { copy.set(e.id, { ...copy.get(e.id), ...e }); if (e.spec) specs.set(e.id, (specs.get(e.id) ?? 0) + 1); } },
    get writable() { return allowance > 0; },
    drained: () => new Promise<void>((r) => { release = r; }),
    isClosed: false,
  };
  const feed = new HolderFeed(link, (r) => entry(r, true), () => store.values(), { chunkBytes: 4096, maxBacklog: 1 << 30, log, seqOf: (id) => store.get(id)?.seq, nextSeq: () => seq });
  const finish = (rec: TaskRecord) => { rec.state = 'done'; rec.result = { text: `echo ${rec.id}`, worker: 'w', attempt: 1 }; };
  const delta = (recs: TaskRecord[], withSpec = false) => feed.flush(chunks(recs.map((r) => entry(r, withSpec)), 4096, log));
  const open = () => { allowance = Infinity; const r = release; release = undefined; r?.(); };
  return { store, add, copy, specs, feed, finish, delta, open, setAllowance: (n: number) => { allowance = n; } };
}

const resultOf = (copy: Map<string, Record<string, unknown>>, id: string) => (copy.get(id)?.result as { text?: string } | undefined)?.text;
const settle = () => new Promise((r) => setTimeout(r, 20));

t.test('a whole sync under way: results of tasks it has not reached wait for it; the copy ends equal', async (t) => {
  const s = setup();
  const first = Array.from({ length: 100 }, (_, i) => s.add(`t-${i}`));
  s.setAllowance(5); // the holder takes five frames, then stops reading
  s.feed.startSync();
  t.ok(s.feed.syncing, 'the sync is under way');
  const reached = s.copy.size;
  t.ok(reached > 0 && reached < 100, `the sync reached ${reached} of 100`);

  for (const r of first) s.finish(r);
  s.delta(first);
  const fresh = Array.from({ length: 10 }, (_, i) => s.add(`n-${i}`));
  s.delta(fresh, true);
  t.equal(s.feed.stats.skipped, 100 - reached, 'the results of the tasks not reached are left to the sync; the new tasks are queued as deltas');

  s.open();
  await settle();
  t.notOk(s.feed.syncing, 'the sync ended');
  t.equal(s.copy.size, 110, 'the holder has every task');
  t.equal(first.filter((r) => resultOf(s.copy, r.id) !== `echo ${r.id}`).length, 0, 'every finished task has its result');
  t.equal(fresh.filter((r) => (s.copy.get(r.id)?.spec as { prompt?: string } | undefined)?.prompt !== r.spec.prompt).length, 0, 'every new task has its spec');
  t.equal([...s.specs.values()].filter((n) => n !== 1).length, 0, 'each task\'s spec was sent once: by the sync, or as a delta for the new ones');

  // Once the sync is over, every delta goes.
  for (const r of fresh) s.finish(r);
  s.delta(fresh);
  await settle();
  t.equal(s.feed.stats.skipped, 100 - reached, 'nothing skipped after the sync');
  t.equal(fresh.filter((r) => resultOf(s.copy, r.id) !== `echo ${r.id}`).length, 0, 'and their results');
});

t.test('a repair window skips no delta', async (t) => {
  const s = setup();
  const recs = Array.from({ length: 50 }, (_, i) => s.add(`r-${i}`));
  s.setAllowance(1);
  s.feed.startSync(s.store.values(), 20); // a window of the state, not the whole
  for (const r of recs) s.finish(r);
  s.delta(recs);
  t.equal(s.feed.stats.skipped, 0, 'every delta is queued');
  s.open();
  await settle();
  t.equal(recs.filter((r) => resultOf(s.copy, r.id) !== `echo ${r.id}`).length, 0, 'every task has its result');
});
