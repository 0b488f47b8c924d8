import t from 'tap';
import fs from 'node:fs';
import { TaskStore } from '../../hub/store.js';
import { io } from '../../hub/journal-files.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { tempDir } from '../helpers/cli.js';

/**
 * The archive and the journal share the state dir's disk: a full disk can take the archive's write
 * and then refuse the journal's evict record that follows it. The tasks stay hot (nothing says they
 * left), and the next pass must not write their lines a second time: it used to, so the archive held
 * each such batch twice. Here the journal's writes fail with ENOSPC (its file only, in this process)
 * while the archive's go through, for a few passes; then space frees.
 */

const q = { maxDepth: 10_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const w = { id: 'w', caps: [] as string[] };

/** Lines per id in the archive files. */
function archiveLines(dir: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const [, f] of archiveFiles(archiveDir(dir))) {
    for (const l of fs.readFileSync(f, 'utf8').split('\n')) {
      const id = /^\{"t":"archived","id":"([^"]+)"/.exec(l)?.[1];
      if (id) m.set(id, (m.get(id) ?? 0) + 1);
    }
  }
  return m;
}

t.test('an archive write whose evict record the journal refuses is not written again at the next pass', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, { fsyncMs: 0 }, { retain: { ageMs: 3600_000, count: 5 }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  const ids = Array.from({ length: 30 }, (_, i) => `u${i}`);
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  for (let k = 0; k < ids.length; k++) {
    const rec = s.lease(w)!;
    await s.complete(rec.id, { text: `answer ${rec.id}`, worker: 'w', attempt: rec.attempts });
  }
  // The journal's disk is full from here: its writes fail, the archive's (another fd) do not.
  const write = io.write;
  const isJournal = (fd: number): boolean => { try { return fs.readlinkSync(`/proc/self/fd/${fd}`).endsWith('journal.ndjson'); } catch { return false; } };
  io.write = (fd, buf) => (isJournal(fd) ? Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })) : write(fd, buf));
  t.teardown(() => { io.write = write; });
  let failed = 0;
  for (let pass = 0; pass < 4; pass++) await s.evict().catch((e: { code?: string }) => { if (e.code === 'SWARM_ERR_DISK_FULL') failed++; });
  t.equal(failed, 4, 'each pass fails: the journal cannot say the tasks left');
  t.equal(s.retention.hot_finished, 30, 'so all 30 stay hot');
  const once = [...archiveLines(dir).values()];
  t.ok(once.length > 0 && once.every((n) => n === 1), `the lines written are written once (${once.length} ids, at most ${Math.max(...once)} lines each)`);

  // Space frees: the batch already written is recorded as it is, the rest archived.
  io.write = write;
  await s.evict();
  t.equal(s.retention.hot_finished, 5, 'the horizon holds again');
  const lines = archiveLines(dir);
  t.equal(lines.size, 25, '25 archived');
  t.same([...lines.values()].filter((n) => n > 1), [], 'duplicated 0: none archived twice');
  for (const id of ids.slice(0, 25)) {
    const r = s.lookup(id);
    if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) t.fail(`${id}: ${JSON.stringify(r)}`);
  }
  // And after a restart (the journal read back): the same answers, nothing archived again.
  s.close();
  const s2 = await TaskStore.open(dir, q, { fsyncMs: 0 }, { retain: { ageMs: 3600_000, count: 5 }, evictEveryMs: 3600_000 });
  t.teardown(() => s2.close());
  await s2.evict();
  let lost = 0;
  for (const id of ids) { const r = s2.lookup(id); if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) lost++; }
  t.equal(lost, 0, 'lost 0 after a restart');
  t.same([...archiveLines(dir).values()].filter((n) => n > 1), [], 'duplicated 0 after a restart');
});
