import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { TaskStore, type StoreOptions } from '../../hub/store.js';
import { readArchive } from '../../hub/archive-read.js';
import { ResultsArchive, archiveDir, archiveFiles, type ArchivedTask } from '../../hub/archive.js';
import { archiveBytes } from '../helpers/archive-bytes.js';
import { parseArchiveMax, archiveMaxString, rotateBytesFor } from '../../hub/archive-bound.js';
import { nodeResult } from '../../hub/runs.js';
import { tempDir } from '../helpers/cli.js';

/**
 * The results archive under `--archive-max`: the oldest whole files go past the bound, never the one
 * being written; a task whose record went answers failed with SWARM_ERR_RESULT_PRUNED (lookup, a
 * duplicate submit) and never runs again inside the duplicate window; a restart replays evict records
 * naming pruned files; a file that cannot be removed does not stop the archive.
 */

const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const w = { id: 'w', caps: [] as string[] };
const ROTATE = 8 * 1024;
const MAX = 4 * ROTATE;
const opts = (extra: Partial<StoreOptions> = {}): StoreOptions => ({
  retain: { ageMs: 3600_000, count: 20 }, evictEveryMs: 3600_000, archiveRotateBytes: ROTATE, archiveMax: { bytes: MAX, ageMs: 0 }, ...extra,
});
const idOf = (i: number) => `t${String(i).padStart(5, '0')}`;

/** Submit, run and evict `ids` in batches of 50, as the hub's parts would. */
async function runAll(s: TaskStore, ids: string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 50) {
    await s.submitMany(ids.slice(i, i + 50).map((id) => ({ id, prompt: `prompt ${id} ${'x'.repeat(80)}` })));
    for (let k = 0; k < 50; k++) {
      const rec = s.lease(w);
      if (!rec) break;
      await s.complete(rec.id, { text: `answer ${rec.id}`, worker: 'w', attempt: rec.attempts });
    }
    await s.evict();
  }
}

const diskBytes = archiveBytes;
const archivedIds = (dir: string): string[] => { const out: string[] = []; readArchive(dir, {}, (a) => out.push(a.id)); return out; };

/** Every id: hot, archived (readable) or pruned; none twice, none lost. */
function account(t: Test, s: TaskStore, dir: string, ids: string[]): { hot: number; archived: number; pruned: number } {
  const inArchive = archivedIds(dir);
  const seen = new Set<string>();
  let dup = 0;
  for (const id of inArchive) { if (seen.has(id) || s.queue.has(id)) dup++; seen.add(id); }
  let lost = 0, pruned = 0, hot = 0;
  for (const id of ids) {
    if (s.queue.has(id)) { hot++; continue; }
    if (seen.has(id)) continue;
    const r = s.lookup(id);
    if (r?.state === 'failed' && r.error?.code === 'SWARM_ERR_RESULT_PRUNED') pruned++; else lost++;
  }
  t.equal(lost, 0, 'lost 0');
  t.equal(dup, 0, 'duplicated 0');
  return { hot, archived: inArchive.length, pruned };
}

t.test('the archive stays under its bound: oldest files removed, the current one kept; pruned tasks answer SWARM_ERR_RESULT_PRUNED', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, opts());
  const ids = Array.from({ length: 1500 }, (_, i) => idOf(i));
  let most = 0;
  for (let i = 0; i < ids.length; i += 250) { await runAll(s, ids.slice(i, i + 250)); most = Math.max(most, diskBytes(dir)); }
  const a = s.retention.archive!;
  const files = archiveFiles(archiveDir(dir));
  t.ok(a.pruned_files >= 10, `${a.pruned_files} files pruned (${a.pruned_bytes} bytes)`);
  t.ok(most <= MAX, `the archive on disk never passed its bound after a batch: at most ${most} of ${MAX} bytes`);
  t.equal(a.bytes, diskBytes(dir), 'its bytes as counted are the files\' on disk');
  t.equal(a.files, files.length, 'and its files');
  // What status --json and /metrics print: the counts survive JSON (they are read from the files kept).
  const json = JSON.parse(JSON.stringify(s.retention)) as { archive: { files: number; bytes: number; oldest_file: number } };
  t.same({ files: json.archive.files, bytes: json.archive.bytes, oldest: json.archive.oldest_file }, { files: files.length, bytes: diskBytes(dir), oldest: files[0]![0] }, 'the same in status --json');
  t.notOk(fs.existsSync(path.join(archiveDir(dir), 'results-000001.ndjson')), 'the first file is gone');
  t.equal(files[0]![0], a.oldest_file, 'the oldest kept is reported');
  t.same(files.map(([n]) => n), Array.from({ length: files.length }, (_, i) => a.oldest_file + i), 'the files kept are the newest, in a row');
  t.equal(files.at(-1)![0], s.retention.archive!.oldest_file + files.length - 1, 'the current file is kept');

  const early = s.lookup(idOf(0));
  t.match(early, { id: idOf(0), state: 'failed', error: { code: 'SWARM_ERR_RESULT_PRUNED' } }, 'a pruned task: failed, SWARM_ERR_RESULT_PRUNED');
  const last = archivedIds(dir).at(-1)!;
  t.equal(s.lookup(last)?.result?.text, `answer ${last}`, 'a task still archived is read back with its result');
  const [again] = await s.submitMany([{ id: idOf(0), prompt: 'again' }]);
  t.ok(again!.duplicate, 'a pruned id resubmitted inside the window is a duplicate');
  t.match(again!.record, { state: 'failed', error: { code: 'SWARM_ERR_RESULT_PRUNED' } });
  t.equal(s.queue.counts().queued, 0, 'and does not run again');
  t.equal(await s.complete(idOf(1), { text: 'late', worker: 'x', attempt: 1 }), 'duplicate', 'a late result for a pruned id is a duplicate');
  // A resumed topology run resubmits its nodes: a pruned one is a failed node, not an empty answer.
  t.match(nodeResult(again!.record), { ok: false, text: '', error: { code: 'SWARM_ERR_RESULT_PRUNED' } }, 'a resumed run sees the node failed, SWARM_ERR_RESULT_PRUNED');
  const before = account(t, s, dir, ids);
  t.ok(before.pruned > 1000, `${before.pruned} pruned, ${before.archived} archived, ${before.hot} hot`);
  await s.close();

  // Restart: the journal's evict records name pruned files; replay keeps every id known.
  const s2 = await TaskStore.open(dir, q, j, opts());
  t.same(account(t, s2, dir, ids), before, 'after a restart: the same hot, archived and pruned');
  t.equal(s2.retention.archive!.bytes, diskBytes(dir));
  // More work after the restart, a compaction (a snapshot of evict records naming pruned files), and a second restart.
  const more = Array.from({ length: 500 }, (_, i) => idOf(1500 + i));
  await runAll(s2, more);
  t.ok(diskBytes(dir) <= MAX, 'still bounded after the restart');
  await s2.compact();
  await s2.close();
  const s3 = await TaskStore.open(dir, q, j, opts());
  t.teardown(() => s3.close());
  const after = account(t, s3, dir, [...ids, ...more]);
  t.equal(after.hot + after.archived + after.pruned, 2000, `every task known after compaction and restart: ${JSON.stringify(after)}`);
  const [dup] = await s3.submitMany([{ id: idOf(5), prompt: 'again' }]);
  t.ok(dup!.duplicate, 'the window survives the snapshot');
  t.equal(s3.queue.counts().queued, 0);
});

t.test('the age bound removes files last written before it, at the retention pass, never the current one', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, opts({ archiveMax: { bytes: 0, ageMs: 60_000 } }));
  t.teardown(() => s.close());
  await runAll(s, Array.from({ length: 400 }, (_, i) => idOf(i)));
  const n = archiveFiles(archiveDir(dir)).length;
  t.ok(n > 3, `${n} files`);
  await s.evict(Date.now() + 30_000);
  t.equal(archiveFiles(archiveDir(dir)).length, n, 'none younger than the age removed');
  await s.evict(Date.now() + 120_000);
  t.equal(archiveFiles(archiveDir(dir)).length, 1, 'past the age: every file but the current one');
  t.equal(s.retention.archive!.pruned_files, n - 1);
});

/** Make `file` impossible to remove: immutable as root (chmod does not stop root), its folder read-only otherwise. */
function block(file: string): (() => void) | undefined {
  if (process.getuid?.() === 0) {
    if (spawnSync('chattr', ['+i', file]).status !== 0) return undefined;
    return () => { spawnSync('chattr', ['-i', file]); };
  }
  const d = path.dirname(file);
  fs.chmodSync(d, 0o500);
  return () => fs.chmodSync(d, 0o700);
}

t.test('a file that cannot be removed: counted and reported, the archive goes on (over its bound), and catches up once it can', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, opts());
  t.teardown(() => s.close());
  await runAll(s, Array.from({ length: 300 }, (_, i) => idOf(i)));
  const oldest = archiveFiles(archiveDir(dir))[0]![1];
  const unblock = block(oldest);
  if (!unblock) { t.comment('skipped: cannot make a file immutable here (chattr)'); return; }
  t.teardown(unblock);
  const ids = Array.from({ length: 600 }, (_, i) => idOf(300 + i));
  await runAll(s, ids);
  const a = s.retention.archive!;
  t.ok(a.prune_errors >= 1, `${a.prune_errors} prune errors: ${a.last_prune_error}`);
  t.ok(fs.existsSync(oldest), 'the file stays');
  t.ok(ids.every((id) => !s.queue.has(id) || s.queue.get(id)!.state === 'done'), 'every task finished');
  t.ok(s.retention.evicted >= 850, `eviction went on: ${s.retention.evicted} archived`);
  t.equal(s.retention.last_error, undefined, 'no eviction failed');
  unblock();
  await s.evict(Date.now() + 11_000);
  t.notOk(fs.existsSync(oldest), 'removed at the next try once it can be');
  t.ok(diskBytes(dir) <= MAX, `back under the bound: ${diskBytes(dir)} of ${MAX}`);
  t.equal(s.retention.archive!.last_prune_error, undefined, 'the error clears');
});

t.test('--archive-max parses sizes and ages; bad values are SWARM_ERR_CONFIG', async (t) => {
  t.same(parseArchiveMax('2GiB'), { bytes: 2 * 2 ** 30, ageMs: 0 });
  t.same(parseArchiveMax('512MiB,30d'), { bytes: 512 * 2 ** 20, ageMs: 30 * 86_400_000 });
  t.same(parseArchiveMax(',90d'), { bytes: 0, ageMs: 90 * 86_400_000 });
  t.same(parseArchiveMax('off'), { bytes: 0, ageMs: 0 });
  for (const v of ['512MiB,30d', ',90d', 'off', '1MiB']) t.same(parseArchiveMax(archiveMaxString(parseArchiveMax(v))), parseArchiveMax(v), `${v} round-trips`);
  for (const bad of ['', ',', '0', '2', '-1GiB', '512KiB', 'lots', '1GiB,0', '1GiB,soon', '1GiB,367d', '1GiB,1d,3', '2PiB', '9999999TB']) t.throws(() => parseArchiveMax(bad), { code: 'SWARM_ERR_CONFIG' }, JSON.stringify(bad));
  t.equal(rotateBytesFor({ bytes: 2 * 2 ** 30, ageMs: 0 }), 64 * 2 ** 20, '2 GiB: 64 MiB files');
  t.equal(rotateBytesFor({ bytes: 2 ** 20, ageMs: 0 }), 128 * 1024, '1 MiB: 128 KiB files');
});

t.test('files past results-999999 are listed, pruned and reopened like the rest', async (t) => {
  const dir = tempDir(t);
  fs.mkdirSync(archiveDir(dir), { recursive: true });
  fs.writeFileSync(path.join(archiveDir(dir), 'results-999998.ndjson'), '');
  const line = (i: number): ArchivedTask => ({ t: 'archived', id: idOf(i), state: 'done', spec: { id: idOf(i), prompt: 'x'.repeat(300), priority: 0 }, attempts: 1, submitted_at: 1, finished_at: 2, evicted_at: 3, result: { text: 'y', worker: 'w', attempt: 1 } });
  let a = ResultsArchive.open(dir, 1024, { bytes: 4096, ageMs: 0 });
  for (let i = 0; i < 20; i++) await a.append([line(i), line(i + 100)]);
  a.close();
  const files = archiveFiles(archiveDir(dir)).map(([n]) => n);
  t.ok(files.at(-1)! >= 1_000_005, `numbered past 999999: ${files.join(', ')}`);
  t.ok(files.length <= 5, 'and pruned there as before');
  a = ResultsArchive.open(dir, 1024, { bytes: 4096, ageMs: 0 });
  t.equal(a.position.file, files.at(-1), 'a restart appends to the newest, not to results-999999');
  const at = await a.append([line(500)]);
  t.equal(a.read(at.file, at.offsets[0]!)?.id, idOf(500), 'and reads it back');
  a.close();
});

t.test('a pass archives a backlog in writes of up to 5,000 tasks and 16 MiB, each one fsync and one evict record: 12 MB past the horizon is one write, not six', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 1 }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  // 2,500 tasks of ~5 KB (answers of 4 KB): 12 MB past the horizon at once. A write's cost is its
  // fsyncs, whatever its size: at 2 MiB a write (six here) a loaded hub evicted slower than it finished.
  const ids = Array.from({ length: 2500 }, (_, i) => idOf(i));
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  for (let rec = s.lease(w); rec; rec = s.lease(w)) await s.complete(rec.id, { text: `answer ${rec.id} ${'a'.repeat(4096)}`, worker: 'w', attempt: rec.attempts });
  // The loop turns while the write's lines are encoded (hub/encode-turns.ts, 1,000 tasks or 2 MiB a
  // turn). Seen from the encoding itself: each result notes the loop's turn when it is stringified
  // (a non-enumerable toJSON: the line written is the same). Awaits of writes and fsyncs turn the
  // loop too, so the turns of the whole pass would not tell one encoding from many.
  let turn = 0, ticking = true, watching = true;
  const tick = () => { turn++; if (ticking) setImmediate(tick); };
  const encodedIn: number[] = [];
  for (const id of ids) {
    const r = s.queue.get(id)?.result;
    if (!r) continue;
    Object.defineProperty(r, 'toJSON', { value(this: object) { if (watching) encodedIn.push(turn); return { ...this }; } });
  }
  setImmediate(tick);
  await s.evict();
  ticking = false;
  watching = false;
  const batches = fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').split('\n').filter((l) => l.includes('"t":"evict"')).map((l) => (JSON.parse(l.slice(l.indexOf('{'))) as { ids: string[] }).ids.length);
  t.equal(batches.reduce((a, b) => a + b, 0), 2499, 'every task past the horizon left in the one pass');
  t.same(batches, [2499], 'in one write and one evict record');
  const perTurn = [...encodedIn.reduce((m, k) => m.set(k, (m.get(k) ?? 0) + 1), new Map<number, number>()).values()];
  t.equal(encodedIn.length, 2499, 'each archived result encoded once');
  t.ok(perTurn.length >= 6, `encoded in ${perTurn.length} turns of the loop (every 2 MiB: 12 MB is 6 at least)`);
  t.ok(Math.max(...perTurn) <= 1000, `at most 1,000 results a turn (${perTurn.join(', ')})`);
  t.equal(archivedIds(dir).length, 2499, 'each archived once');
});
