import t from 'tap';
import fs from 'node:fs';
import { TaskStore } from '../../hub/store.js';
import { io } from '../../hub/journal-files.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { readArchive } from '../../hub/archive-read.js';
import { tempDir } from '../helpers/cli.js';

/**
 * An archive write that fails (here its fsync, EIO) is cut back to the file's last good length; when
 * that cut fails too (the same failing disk), the batch's lines stay on disk past the good length.
 * The next write must not put them there a second time: the archive opens its files for appending,
 * so it used to write the batch again after the leftover copy. Faults injected at the archive's fs
 * calls (io.fsync, io.ftruncate), for the archive's file only.
 */

const q = { maxDepth: 10_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const w = { id: 'w', caps: [] as string[] };
const retain = { retain: { ageMs: 3600_000, count: 2 }, evictEveryMs: 3600_000 };

const isArchive = (fd: number): boolean => { try { return /results-\d+\.ndjson$/.test(fs.readlinkSync(`/proc/self/fd/${fd}`)); } catch { return false; } };
const eio = (call: string): Error => Object.assign(new Error(`EIO: i/o error, ${call}`), { code: 'EIO' });

/** The archive's next `fsyncs` fsyncs fail, and its next `cuts` ftruncates (until the test ends). */
function archiveFaults(t: { teardown(f: () => void): void }, f: { fsyncs: number; cuts: number }): typeof f {
  const { fsync, ftruncate } = io;
  io.fsync = (fd) => (isArchive(fd) && f.fsyncs > 0 ? (f.fsyncs--, Promise.reject(eio('fsync'))) : fsync(fd));
  io.ftruncate = (fd, len) => (isArchive(fd) && f.cuts > 0 ? (f.cuts--, Promise.reject(eio('ftruncate'))) : ftruncate(fd, len));
  t.teardown(() => { io.fsync = fsync; io.ftruncate = ftruncate; });
  return f;
}

/** Whole lines per id in the archive files, and the bytes past the last newline. */
function onDisk(dir: string): { lines: Map<string, number>; torn: number } {
  const lines = new Map<string, number>();
  let torn = 0;
  for (const [, f] of archiveFiles(archiveDir(dir))) {
    const text = fs.readFileSync(f, 'utf8');
    torn += text.length - (text.lastIndexOf('\n') + 1);
    for (const l of text.split('\n')) {
      const id = /^\{"t":"archived","id":"([^"]+)"/.exec(l)?.[1];
      if (id) lines.set(id, (lines.get(id) ?? 0) + 1);
    }
  }
  return { lines, torn };
}

async function finished(s: TaskStore, ids: string[]): Promise<void> {
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  for (const _ of ids) {
    const rec = s.lease(w)!;
    await s.complete(rec.id, { text: `answer ${rec.id}`, worker: 'w', attempt: rec.attempts });
  }
}

/** lost: a task that does not answer done with its own text; duplicated: ids with more than one line on disk. */
function counts(s: TaskStore, dir: string, ids: string[]): { lost: number; duplicated: number; shown: number; repeated: number } {
  let lost = 0;
  for (const id of ids) { const r = s.lookup(id); if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) lost++; }
  const duplicated = [...onDisk(dir).lines.values()].filter((n) => n > 1).length;
  let shown = 0;
  const rep = readArchive(dir, {}, () => shown++);
  return { lost, duplicated, shown, repeated: rep.repeated };
}

t.test('a failed archive write whose cut-back fails too is not written a second time by the next pass', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.teardown(() => s.close());
  const ids = Array.from({ length: 12 }, (_, i) => `c${i}`);
  await finished(s, ids);
  // The first write and its cut-back fail; so does the next cut-back the archive tries.
  const f = archiveFaults(t, { fsyncs: 1, cuts: 2 });
  const pass = () => s.evict().then((n) => `${n} left`, (e: { code?: string }) => e.code ?? 'failed');
  t.equal(await pass(), 'SWARM_ERR_JOURNAL', 'the write fails (fsync), the tasks stay hot');
  t.equal(onDisk(dir).lines.size, 10, 'and its cut-back failed: the 10 lines are on disk past the good length');
  t.equal(await pass(), 'SWARM_ERR_JOURNAL', 'the next pass cannot cut them either: it writes nothing');
  t.same([...onDisk(dir).lines.values()].filter((n) => n > 1), [], 'so none is there twice');
  t.equal(f.cuts, 0, 'every fault spent');
  t.equal(await pass(), '10 left', 'the cut goes through: the batch is written');
  t.equal(s.retention.hot_finished, 2);
  const { torn } = onDisk(dir);
  t.equal(torn, 0, 'the file ends with a whole line');
  t.same(counts(s, dir, ids), { lost: 0, duplicated: 0, shown: 10, repeated: 0 }, 'lost 0, duplicated 0: each line once on disk, each task its own answer');
});

t.test('a failed write left on disk (its cut-back failed) and then a restart: its lines are taken as written, once', async (t) => {
  const dir = tempDir(t);
  let s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.teardown(() => s.close());
  const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
  await finished(s, ids);
  archiveFaults(t, { fsyncs: 1, cuts: 1 });
  t.equal(await s.evict().catch((e: { code?: string }) => e.code), 'SWARM_ERR_JOURNAL', 'the write fails, its cut-back too');
  s.close();
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.equal(s.retention.hot_finished, 2, 'the start finds the 10 lines past the covered end and records them');
  t.equal(await s.evict(), 0, 'nothing left to write');
  t.same(counts(s, dir, ids), { lost: 0, duplicated: 0, shown: 10, repeated: 0 }, 'lost 0, duplicated 0');
  s.close();
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.same(counts(s, dir, ids), { lost: 0, duplicated: 0, shown: 10, repeated: 0 }, 'and after another restart');
});
