import t from 'tap';
import pino from 'pino';
import type { Payload, ReplicaEntry } from '../../protocol/index.js';
import { HolderFeed, TurnShare, type FeedLink } from '../../hub/replicate-feed.js';
import { chunks } from '../../hub/replicate-chunks.js';
import { Versions } from '../../hub/replicate-resume.js';
import type { TaskRecord } from '../../hub/task.js';

/**
 * A holder that falls behind in the middle of its sync is resumed from its mark: the tasks its sync
 * had covered and that changed since, then the rest of the sync. Finding where the rest starts was a
 * pass over the hot state up to the holder's position in one turn of the hub's loop (and, for a mark
 * older than the change log, finding what changed was another, whole). Now the resume is read a chunk
 * at a time like any sync, and a pass counts the records it looks at against the turn's budget, so it
 * proceeds in turns; tasks change, finish, are evicted and arrive between them, and the holder's copy
 * still ends equal to the hub's.
 */

const log = pino({ level: 'silent' });
const N = 60_000;
const AT = 50_000;

type Rec = TaskRecord & { state: string };

async function resumeScenario(t: { ok: (x: unknown, m: string) => void; equal: (a: unknown, b: unknown, m: string) => void; notOk: (x: unknown, m: string) => void }, fromLog: boolean) {
  const recs = new Map<string, Rec>();
  const versions = new Versions();
  let next = 0;
  const add = () => { const id = `r-${next}`; const r = { id, seq: next++, state: 'queued', attempts: 0, submittedAt: 0, spec: { id, prompt: `p ${id}`, priority: 0 } } as unknown as Rec; recs.set(id, r); versions.changed(id, r.seq); return r; };
  for (let i = 0; i < N; i++) add();
  versions.flushed();

  // The records looked at by every pass over the hot state, and the most of them in one turn.
  let looked = 0, turnStart = 0, most = 0, turns = 0;
  function* all(): Generator<TaskRecord> { for (const r of recs.values()) { looked++; yield r; } }
  const entry = (r: TaskRecord, withSpec: boolean) => ({ id: r.id, seq: r.seq, state: (r as Rec).state, ...(withSpec ? { spec: r.spec } : {}) }) as unknown as ReplicaEntry;

  // The holder's copy: entries merged by id (one without its spec keeps the spec it had), evictions dropped.
  const copy = new Map<string, { seq: number; state: string; spec?: unknown }>();
  const link: FeedLink = {
    send: (p: Payload<'STATE'>) => {
      for (const e of p.entries) { const had = copy.get(e.id); const x = e as unknown as { seq: number; state: string; spec?: unknown }; copy.set(e.id, { seq: x.seq, state: x.state, spec: x.spec ?? had?.spec }); }
      for (const id of p.evicted ?? []) copy.delete(id);
    },
    writable: true, drained: async () => {}, isClosed: false,
  };
  const feed = new HolderFeed(link, entry, () => all(), {
    chunkBytes: 16 * 1024, maxBacklog: 1 << 30, share: new TurnShare(64 * 1024), log,
    seqOf: (id) => recs.get(id)?.seq, nextSeq: () => next,
  }, (seq, end) => versions.mark(seq, end));

  // The holder's sync had reached AT when it fell behind: it holds those tasks as they were then.
  for (const r of recs.values()) if (r.seq <= AT) copy.set(r.id, { seq: r.seq, state: r.state, spec: r.spec });
  const mark = versions.mark(AT, N);
  // Changes it missed (its deltas were dropped): tasks it had, leased.
  for (let i = 0; i < AT; i += 250) { const r = recs.get(`r-${i}`)!; r.state = 'leased'; versions.changed(r.id); }
  versions.flushed();

  // As the replicator does: a change is a delta to the feed (which leaves to the sync those it has not reached).
  const delta = (rs: Rec[], withSpec = false) => {
    for (const r of rs) versions.changed(r.id, withSpec ? r.seq : undefined);
    const cs = chunks(rs.map((r) => entry(r, withSpec)), 16 * 1024, log);
    cs.forEach((c) => { c.ver = versions.now; });
    feed.flush(cs);
    versions.flushed();
  };
  const evicted: string[] = [];
  const evict = (r: Rec) => {
    r.state = 'done';
    delta([r]);
    recs.delete(r.id);
    versions.evicted([r.id]);
    evicted.push(r.id);
    feed.evict([r.id], JSON.stringify({ full: false, entries: [], evicted: [r.id] }));
  };

  let ticking = true;
  const tick = () => {
    most = Math.max(most, looked - turnStart);
    turnStart = looked;
    turns++;
    // Between turns of the resume: tasks it covered and past it change, some finish and leave, new ones come.
    if (turns < 300) {
      const k = turns * 37;
      const covered = recs.get(`r-${(k * 13) % AT}`), past = recs.get(`r-${AT + 1 + (k % (N - AT - 1))}`);
      if (covered) { covered.state = 'leased'; delta([covered]); }
      if (past) { past.state = 'leased'; delta([past]); }
      const gone = recs.get(`r-${(k * 7 + 3) % N}`);
      if (gone) evict(gone);
      delta([add()], true);
    }
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);

  const r = versions.resume(mark, all, N, fromLog ? (id) => recs.get(id) : undefined);
  t.equal(r.scanned, !fromLog, fromLog ? 'what changed comes from the change log' : 'what changed takes a pass over the hot state');
  feed.resumeSync(r.records, AT, r.bare);
  for (let i = 0; i < 20_000 && feed.syncing; i++) await new Promise((res) => setImmediate(res));
  ticking = false;
  t.notOk(feed.syncing, `the resume ended, in ${turns} turns`);
  t.ok(most < AT / 2, `at most ${most} records looked at in one turn (the holder's position: ${AT}; before, the pass to it was one turn)`);
  t.ok(feed.stats.passes > 0, `${feed.stats.passes} markers of records passed over`);

  const lost = [...recs.values()].filter((x) => !copy.has(x.id)).length;
  const changed = [...recs.values()].filter((x) => { const c = copy.get(x.id); return c && (c.state !== x.state || c.seq !== x.seq || c.spec === undefined); }).length;
  const extra = [...copy.keys()].filter((id) => !recs.has(id)).length;
  t.ok(evicted.length >= 5, `${evicted.length} tasks evicted while it ran`);
  t.equal(lost, 0, 'lost 0: every task of the hub is in the copy');
  t.equal(changed, 0, 'changed 0: each as the hub has it, with its spec');
  t.equal(extra, 0, 'duplicated 0: nothing the hub no longer has (no evicted task sent back)');
}

t.test('a resume from the middle of a sync proceeds in turns, from the change log, tasks changing and evicted between them', (t) => resumeScenario(t, true));
t.test('and by a pass over the hot state (no lookup by id, as for a mark older than the change log)', (t) => resumeScenario(t, false));
