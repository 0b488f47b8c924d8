import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { TaskStore } from '../../hub/store.js';
import { COMPACT_STEPS } from '../../hub/journal.js';
import { Checker, journalResults } from '../helpers/checker.js';
import { runJournalChild, storeState, toldByChild } from '../helpers/journal-child.js';
import { tempDir } from '../helpers/cli.js';

const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const w = { id: 'w', caps: [] as string[] };
const retain = { ageMs: 3600_000, count: 40 };
const open = (dir: string) => TaskStore.open(dir, q, j, { retain, evictEveryMs: 3600_000, settleAfterOpenMs: 3600_000 });

/** Ids as clients send them: plain, ones the journal escapes, non-ASCII, a surrogate pair. */
const idOf = (i: number): string => [`t-${i}`, `q"\\-${i}`, `ü-${i}`, `😀-${i}`, `t-${i}`][i % 5]!;

/**
 * A store with every kind of record a snapshot holds: tasks queued, done (with and without a
 * receipt), failed, cancelled; evicted ones (their ids remembered), meta records; compacted, then a
 * tail written after the compaction. Compacted again when `twice`.
 */
async function build(dir: string, n = 300, pad = 0): Promise<Record<string, unknown>[]> {
  const s = await open(dir);
  await s.appendMeta('run', { id: 'r1', spec: { steps: ['a', 'ü'] } });
  for (let i = 0; i < n; i += 20) {
    const ids = Array.from({ length: 20 }, (_, k) => idOf(i + k));
    await s.submitMany(ids.map((id, k) => ({ id, prompt: `p ${id} ${'x'.repeat((i + k) % 50 + pad)} ä€`, priority: (i + k) % 3, ...(k % 4 === 0 ? { role: 'coder', caps: ['gpu'] } : {}) })));
    for (let k = 0; k < 12; k++) {
      const r = s.lease(w);
      if (!r) break;
      if (k === 5) { await s.fail(r.id, 'w', { code: 'SWARM_ERR_ENGINE_DIED', msg: 'boom "quoted"' }, false); continue; }
      await s.complete(r.id, { text: `r ${r.id} "ä" \n done`, worker: 'w', attempt: 1, ...(k % 2 ? { receipt: { duration_ms: 12, tokens_out: k } } : {}) });
    }
    await s.cancel(ids[19]!, 'not needed');
    if (i === 100) { await s.evict(); await s.compact(); }
  }
  await s.evict();
  await s.compact();
  // A tail after the compaction: new tasks, a result for a task the snapshot holds queued.
  await s.submitMany([{ id: 'tail-1', prompt: 'tail' }, { id: 'tail-2', prompt: 'tail 2' }]);
  const r = s.lease(w)!;
  await s.complete(r.id, { text: 'late', worker: 'w', attempt: 2 });
  const live = dump(s);
  liveBytes = s.retention.hot_bytes;
  await s.close();
  return live;
}
/** The bytes retention held for the finished tasks when `build`'s store closed. */
let liveBytes = 0;

/** Every field of every task, as the store holds it (specs and results parsed from their lines). */
const dump = (s: TaskStore): Record<string, unknown>[] => [...s.queue.all()].map((r) => JSON.parse(JSON.stringify({
  id: r.id, state: r.state, attempts: r.attempts, seq: r.seq, spec: r.spec, result: r.result && { ...r.result }, error: r.error, submittedAt: r.submittedAt, finishedAt: r.finishedAt,
})) as Record<string, unknown>);

/**
 * Against the store that wrote it: without `seq` (a replay numbers the tasks afresh, in the same
 * order) and a done task's attempts (leases are not journaled: a replayed done task counts none), as it always was.
 */
const noSeq = (tasks: Record<string, unknown>[]): Record<string, unknown>[] => tasks.map(({ seq: _, attempts, ...rest }) => (rest.state === 'done' ? rest : { ...rest, attempts }));

/** Open a copy of `dir` (after `change` to the copy): its tasks, what else replay rebuilds, and how it read the snapshot. */
async function reopen(t: { teardown(fn: () => void): void }, dir: string, name: string, change?: (copy: string) => void) {
  const copy = path.join(path.dirname(dir), name);
  fs.cpSync(dir, copy, { recursive: true });
  change?.(copy);
  const s = await open(copy);
  const tasks = dump(s);
  const ids = tasks.map((x) => x.id as string);
  const other = {
    counts: s.queue.counts(), meta: s.meta, floor: s.acceptedFloor, remembered: s.retention.remembered_ids, hot: s.retention.hot_finished,
    damage: s.damage.samples, orphans: s.damage.orphans, knows: Array.from({ length: 320 }, (_, i) => s.knows(idOf(i))),
    evicted: Array.from({ length: 320 }, (_, i) => idOf(i)).filter((id) => !ids.includes(id) && s.knows(id)).map((id) => s.archivedAt(id)),
  };
  const indexed = s.journalStats!.snapshot_indexed;
  const hotBytes = s.retention.hot_bytes;
  await s.close();
  return { tasks, other, indexed, copy, hotBytes };
}

t.test('the snapshot read through its index gives every task as read line by line, field for field', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  const live = await build(dir);
  t.ok(fs.existsSync(path.join(dir, 'snapshot.idx')), 'the compaction wrote the index');
  const viaIndex = await reopen(t, dir, 'a');
  const lineByLine = await reopen(t, dir, 'b', (c) => fs.rmSync(path.join(c, 'snapshot.idx')));
  t.ok(viaIndex.indexed, 'read through the index');
  t.notOk(lineByLine.indexed, 'without it, line by line');
  t.ok(live.length > 100 && viaIndex.other.remembered > 0, `${live.length} hot tasks, ${viaIndex.other.remembered} evicted ids remembered`);
  t.same(noSeq(viaIndex.tasks), noSeq(live), 'the same tasks as the store that wrote it (states, attempts, specs, results, errors, times, order)');
  t.same(lineByLine.tasks, viaIndex.tasks, 'and as the line-by-line replay');
  t.same(lineByLine.other, viaIndex.other, 'the same counts, meta, acceptance floor, duplicate window and archive places');
  t.same(viaIndex.other.damage, [], 'no damage');
  // Retention's bytes come with each done task in the index, as the writing store counted them; a
  // failed task's, and every task's line by line, are counted from the lines (UTF-8 and escapes: for
  // this state's quotes, newlines and non-ASCII text, a few bytes more).
  const off = (n: number): number => Math.abs(n - liveBytes);
  t.ok(off(viaIndex.hotBytes) <= off(lineByLine.hotBytes) && off(viaIndex.hotBytes) < liveBytes * 0.01, `retention's bytes: ${viaIndex.hotBytes} through the index, ${lineByLine.hotBytes} line by line, ${liveBytes} in the store that wrote it`);
});

t.test('an index that is damaged, or not the snapshot\'s, is ignored: the snapshot is read line by line, then indexed again', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  const live = await build(dir, 200);
  // An index written for another snapshot: the one before the last compaction.
  const older = path.join(root, 'older');
  fs.cpSync(dir, older, { recursive: true });
  const s0 = await open(older);
  await s0.submitMany([{ id: 'more', prompt: 'm' }]);
  await s0.compact();
  await s0.close();
  const cases: [string, (c: string) => void][] = [
    ['a flipped byte in the index', (c) => { const f = path.join(c, 'snapshot.idx'); const b = fs.readFileSync(f); b[Math.floor(b.length / 2)]! ^= 0x10; fs.writeFileSync(f, b); }],
    ['an index cut short', (c) => { const f = path.join(c, 'snapshot.idx'); fs.truncateSync(f, Math.floor(fs.statSync(f).size / 3)); }],
    ['another snapshot\'s index', (c) => fs.copyFileSync(path.join(older, 'snapshot.idx'), path.join(c, 'snapshot.idx'))],
  ];
  for (const [name, change] of cases) {
    const r = await reopen(t, dir, name.replace(/\W+/g, '-'), change);
    t.notOk(r.indexed, `${name}: not used`);
    t.same(noSeq(r.tasks), noSeq(live), `${name}: every task as written`);
    t.same(r.other.damage, [], `${name}: no damage (the index is derived data)`);
    // The open asks for a compaction (run here at once), which writes an index for the snapshot.
    const s = await open(r.copy);
    await s.compact();
    await s.close();
    const again = await reopen(t, r.copy, `${name.replace(/\W+/g, '-')}-again`);
    t.ok(again.indexed, `${name}: the next start reads the new index`);
    t.same(again.tasks, r.tasks, `${name}: the same tasks`);
  }
});

t.test('damage in the snapshot is found and reported as line by line: the damaged range is read line by line', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  // Prompts of 20 KB: a snapshot of several ranges (about a MiB each), one of them damaged.
  await build(dir, 200, 20_000);
  const lines = fs.readFileSync(path.join(dir, 'snapshot.ndjson'), 'utf8').split('\n');
  const place = (k: number): number => Buffer.byteLength(lines.slice(0, k).join('\n')) + (k ? 1 : 0);
  const tasks = lines.map((l, k) => [l, k] as const).filter(([l]) => l.startsWith('{"t":"task"'));
  const [victim, victimAt] = tasks[Math.floor(tasks.length / 2)]!;
  const victimId = (JSON.parse(victim) as { spec: { id: string } }).spec.id;
  const resultAt = lines.findIndex((l, k) => k > victimAt + 2 && l.startsWith('{"t":"result"'));
  t.ok(fs.statSync(path.join(dir, 'snapshot.ndjson')).size > 2 * 2 ** 20, 'a snapshot of several ranges');
  // One byte flipped inside a task's prompt, and a result's text overwritten, in the middle of the snapshot.
  const damage = (c: string): void => {
    const f = path.join(c, 'snapshot.ndjson');
    const b = fs.readFileSync(f);
    b[place(victimAt) + 200]! ^= 0x01;
    b.fill(0x23, place(resultAt) + 40, place(resultAt) + 50);
    fs.writeFileSync(f, b);
  };
  const viaIndex = await reopen(t, dir, 'a', damage);
  const lineByLine = await reopen(t, dir, 'b', (c) => { damage(c); fs.rmSync(path.join(c, 'snapshot.idx')); });
  t.equal(viaIndex.other.damage.length, 2, `two damaged lines reported (${viaIndex.other.damage.map((d) => `${d.offset}: ${d.why}`).join('; ')})`);
  t.same(viaIndex.other.damage, lineByLine.other.damage, 'the same damage, at the same offsets, as line by line');
  t.same(viaIndex.tasks, lineByLine.tasks, 'the same tasks kept');
  t.same(viaIndex.other, lineByLine.other, 'and the same rest');
  t.ok(viaIndex.indexed, 'the other ranges through the index');
  t.notOk(viaIndex.tasks.some((x) => x.id === victimId), 'the task whose line was damaged is left out');
  t.ok(viaIndex.tasks.length > 100, `${viaIndex.tasks.length} tasks kept`);
  t.equal(fs.readFileSync(path.join(viaIndex.copy, 'journal.quarantine.ndjson'), 'utf8').trim().split('\n').length, 2, 'both damaged lines are in the quarantine file');
});

t.test('kill -9 at every step of a compaction that writes the snapshot and its index, over an earlier snapshot and index: nothing lost or duplicated', async (t) => {
  for (const step of COMPACT_STEPS) {
    await t.test(`killed after "${step}"`, async (t) => {
      const dir = path.join(tempDir(t), 'state');
      fs.mkdirSync(dir);
      const check = new Checker();
      // A first life compacts (4 KiB segments) and ends; the second is killed at `step` of its first compaction.
      const first = await runJournalChild(dir, '', 200);
      t.ok(first.out.includes('end') && fs.existsSync(path.join(dir, 'snapshot.idx')), 'a snapshot and its index from the first life');
      toldByChild(check, first.out);
      const r = await runJournalChild(dir, step, 400, ['200']);
      t.equal(r.signal, 'SIGKILL', 'the second life died at that step');
      toldByChild(check, r.out);
      const s = await TaskStore.open(dir, q, j);
      const indexed = s.journalStats!.snapshot_indexed;
      const final = storeState(s);
      t.equal(s.damage.records, 0, `no damage from the kill (snapshot read ${indexed ? 'through its index' : 'line by line'})`);
      const v = check.check(final, { expect: (id) => `r ${id}`, resultRecords: journalResults(dir) });
      t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed, unexpected: v.unexpected }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0 }, v.details.join('; '));
      t.ok(check.counts.accepted >= 200, `${check.counts.accepted} acknowledged`);
      // Line by line, the same state.
      await s.close();
      const copy = `${dir}-lines`;
      fs.cpSync(dir, copy, { recursive: true });
      fs.rmSync(path.join(copy, 'snapshot.idx'), { force: true });
      const s2 = await TaskStore.open(copy, q, j);
      t.same(storeState(s2), final, 'the same state read line by line');
      await s2.close();
      const r3 = await runJournalChild(dir, '', 20, ['1000']);
      t.ok(r3.out.includes('end'), 'a later process opens it and carries on');
    });
  }
});
