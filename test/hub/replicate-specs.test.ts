import t from 'tap';
import { Versions } from '../../hub/replicate-resume.js';
import type { TaskRecord } from '../../hub/task.js';

/**
 * A fallen-behind holder is sent what changed since its mark; the tasks whose spec it already has go
 * without it. Which those are follows from the mark: the sync position it had reached, or (its sync
 * complete) the new tasks flushed to every holder by its version.
 */

const rec = (id: string, seq: number) => ({ id, seq }) as unknown as TaskRecord;

t.test('a resume sends without their spec the tasks the holder has the spec of', async (t) => {
  const v = new Versions();
  const all: TaskRecord[] = [];
  const accept = (n: number) => { for (let i = 0; i < n; i++) { const r = rec(`t${all.length}`, all.length); all.push(r); v.changed(r.id, r.seq); } v.flushed(); };
  accept(10); // seq 0-9
  const complete = v.mark();
  accept(5); // seq 10-14, after the mark
  t.equal(v.specsBy(complete.ver), 9, 'by the mark, the first ten specs went to every holder');
  t.equal(v.specsBy(0), -1, 'before any flush: none known');
  // Changes to old and new tasks after the mark.
  for (const id of ['t3', 't12']) v.changed(id);
  v.flushed();
  const r = v.resume(complete, () => all);
  const sent = [...r.records];
  t.same(sent.map((x) => x.id).sort(), ['t10', 't11', 't12', 't13', 't14', 't3'], 'what changed since the mark');
  t.same(sent.filter(r.bare).map((x) => x.id), ['t3'], 'only the task it had goes bare; the new ones carry their spec');

  // A mark in the middle of a sync: everything up to its position was sent with its spec.
  const mid = { ...v.mark(4), ver: complete.ver };
  const m = v.resume(mid, () => all);
  const out = [...m.records];
  t.ok(out.filter((x) => x.seq <= 4).every(m.bare), 'covered by the sync: bare');
  t.ok(out.filter((x) => x.seq > 4).every((x) => !m.bare(x)), 'past its position: with the spec');

  // The sync under way then ended at seq 8: the tasks from there on went as deltas, so of those only
  // what changed since the mark goes again, and without the spec where it had gone by then.
  const ended = v.resume(mid, () => all, 8);
  const again = [...ended.records].map((x) => x.id);
  t.same(again.filter((id) => Number(id.slice(1)) > 4), ['t5', 't6', 't7', 't10', 't11', 't12', 't13', 't14'], 'the rest of the sync, then what changed after its end');
  t.notOk(again.includes('t8') || again.includes('t9'), 'tasks past its end unchanged since the mark are not sent again');
});

t.test('past the end of the sync, tasks the holder got as deltas and that changed go without their spec', async (t) => {
  const v = new Versions();
  const all: TaskRecord[] = [];
  for (let i = 0; i < 10; i++) { const r = rec(`u${i}`, i); all.push(r); v.changed(r.id, r.seq); }
  v.flushed();
  const m = v.mark(2);
  v.changed('u9');
  v.changed('u1');
  v.flushed();
  const r = v.resume(m, () => all, 6);
  const sent = [...r.records];
  t.same(sent.map((x) => x.id), ['u1', 'u3', 'u4', 'u5', 'u9'], 'covered and changed, the rest of the sync, then changed past its end');
  t.same(sent.filter(r.bare).map((x) => x.id), ['u1', 'u9'], 'the covered one and the one past the end go bare');
});

t.test('the spec marks stay bounded however many flushes carried new tasks', async (t) => {
  const v = new Versions();
  for (let i = 0; i < 250_000; i++) { v.changed(`x${i}`, i); v.flushed(); }
  t.equal(v.specsBy(v.mark().ver), 249_999, 'the latest is known');
  t.equal(v.specsBy(1), -1, 'the oldest are forgotten: such a mark gets every spec again');
});

t.test('what changed since a mark comes from the change log, as a pass over the hot state finds it, while the log reaches back to it', async (t) => {
  const v = new Versions();
  const all: TaskRecord[] = [];
  const byId = new Map<string, TaskRecord>();
  for (let i = 0; i < 50; i++) { const r = rec(`c${i}`, i); all.push(r); byId.set(r.id, r); v.changed(r.id, r.seq); }
  v.flushed();
  const m = v.mark();
  // Some tasks change several times, one is evicted (out of the hot state), new ones arrive.
  for (const id of ['c40', 'c3', 'c40', 'c17', 'c3', 'c49']) v.changed(id);
  v.evicted(['c17']);
  byId.delete('c17');
  all.splice(all.findIndex((r) => r.id === 'c17'), 1);
  for (let i = 50; i < 53; i++) { const r = rec(`c${i}`, i); all.push(r); byId.set(r.id, r); v.changed(r.id, r.seq); }
  v.flushed();
  const scanned = v.resume(m, () => all);
  const logged = v.resume(m, () => { throw new Error('no pass over the hot state'); }, Infinity, (id) => byId.get(id));
  t.ok(scanned.scanned, 'without a lookup by id: a pass');
  t.notOk(logged.scanned, 'with one: the log');
  const ids = [...logged.records].map((x) => x.id);
  t.same(ids, [...scanned.records].map((x) => x.id), 'the same tasks, in the same order');
  t.same(ids, ['c3', 'c40', 'c49', 'c50', 'c51', 'c52'], 'each changed task once, in submission order, the evicted one not');
  t.equal(logged.covered, scanned.covered);

  // Past the log's bound the oldest changes are forgotten: a mark from before them takes a pass.
  const old = v.mark();
  for (let i = 0; i < 210_000; i++) v.changed(`c${i % 53}`);
  v.flushed();
  let passes = 0;
  const r = v.resume(old, () => { passes++; return all; }, Infinity, (id) => byId.get(id));
  t.ok(r.scanned && passes === 1, 'a mark older than the log: one pass over the hot state');
  t.equal([...r.records].length, all.length, 'every task changed since');
  const recent = v.resume(v.mark(), () => { throw new Error('no pass'); }, Infinity, (id) => byId.get(id));
  t.equal([...recent.records].length, 0, 'a current mark: nothing, from the log');
});
