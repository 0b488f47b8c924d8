import t from 'tap';
import fs from 'node:fs';
import { TaskStore } from '../../hub/store.js';
import { io } from '../../hub/journal-files.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { readArchive } from '../../hub/archive-read.js';
import { journal, swarm, tempDir } from '../helpers/cli.js';

/**
 * The archive and the journal share the state dir's disk: a full disk can take the archive's write
 * and then refuse the journal's evict record that follows it. The tasks stay hot (nothing says they
 * left), and the next pass must not write their lines a second time: it used to, so the archive held
 * each such batch twice. Here the journal's writes fail with ENOSPC (its file only, in this process)
 * while the archive's go through, for a few passes; then space frees. The second test makes the
 * written batch not the oldest due at the next pass (the clock stepped back), which the evictor
 * once took as a reason to write it again.
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

/** Lease and complete `n` tasks of `s` as worker `w`. */
async function finishAll(s: TaskStore, n: number): Promise<void> {
  for (let k = 0; k < n; k++) {
    const rec = s.lease(w)!;
    await s.complete(rec.id, { text: `answer ${rec.id}`, worker: 'w', attempt: rec.attempts });
  }
}

/** The journal's writes fail with ENOSPC from now until the test ends (or the returned write is put back); other files' do not. */
function journalDiskFull(t: { teardown(f: () => void): void }): typeof io.write {
  const write = io.write;
  const isJournal = (fd: number): boolean => { try { return fs.readlinkSync(`/proc/self/fd/${fd}`).endsWith('journal.ndjson'); } catch { return false; } };
  io.write = (fd, buf) => (isJournal(fd) ? Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })) : write(fd, buf));
  t.teardown(() => { io.write = write; });
  return write;
}

t.test('an archive write whose evict record the journal refuses is not written again at the next pass', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, { fsyncMs: 0 }, { retain: { ageMs: 3600_000, count: 5 }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  const ids = Array.from({ length: 30 }, (_, i) => `u${i}`);
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  await finishAll(s, ids.length);
  // The journal's disk is full from here: its writes fail, the archive's (another fd) do not.
  const write = journalDiskFull(t);
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

/** Times each id appears in the journal's evict records (journal.ndjson, not compacted here). */
function evictRecords(dir: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of journal(dir) as { t: string; ids?: string[] }[]) if (r.t === 'evict') for (const id of r.ids ?? []) m.set(id, (m.get(id) ?? 0) + 1);
  return m;
}

t.test('a batch whose evict record was refused is archived once whatever the next passes find due, and across a restart', async (t) => {
  const dir = tempDir(t);
  // Age horizon only: a task is due an hour after it finished, so a pass's `now` says what is due.
  const retain = { retain: { ageMs: 3600_000, count: 100_000 }, evictEveryMs: 3600_000 };
  let s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.teardown(() => s.close());
  const finish = async (ids: string[]) => {
    await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
    await finishAll(s, ids.length);
  };
  const a = Array.from({ length: 20 }, (_, i) => `a${i}`);
  await finish(a);
  const later = Date.now() + 2 * 3600_000;
  const before = Date.now() - 60_000;
  const write = io.write;
  const full = (on: boolean) => { if (!on) io.write = write; else if (io.write === write) journalDiskFull(t); };
  const pass = (now: number) => s.evict(now).then((n) => `${n} left`, (e: { code?: string }) => e.code ?? 'failed');
  const onceEach = (what: string, ids: string[]) => {
    const lines = archiveLines(dir);
    const wrong = ids.filter((id) => lines.get(id) !== 1).map((id) => `${id}:${lines.get(id) ?? 0}`);
    t.same(wrong, [], `${what}: each of ${ids.length} tasks has exactly one archive line`);
    t.equal([...lines.keys()].filter((id) => !ids.includes(id)).length, 0, `${what}: and no other task has one`);
  };

  full(true);
  t.equal(await pass(later), 'SWARM_ERR_DISK_FULL', 'the archive takes the batch, the journal refuses its evict record');
  onceEach('written, unrecorded', a);
  // The clock steps back: the written batch is not due now, so not the oldest due either.
  t.equal(await pass(before), 'SWARM_ERR_DISK_FULL', 'a pass with nothing due still owes the record, and fails on it');
  t.equal(await pass(later), 'SWARM_ERR_DISK_FULL', 'so does the next, with everything due');
  onceEach('after passes that failed, due or not', a);
  t.equal(s.retention.hot_finished, 20, 'all 20 still hot');
  for (const id of a) { const r = s.lookup(id); if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) t.fail(`${id} while hot: ${JSON.stringify(r)}`); }

  // Space frees while the clock is still behind: the batch is recorded all the same (its lines are
  // there), not kept until it is due again and then written a second time.
  full(false);
  t.equal(await pass(before), '20 left', 'the owed record goes first, due or not');
  await finish(a.map((id) => `b${id.slice(1)}`));
  const b = a.map((id) => `b${id.slice(1)}`);
  // A batch of b refused too, then a restart before any pass records it: the next life finds its
  // lines past the covered end (recover) and records them, nothing written again.
  full(true);
  t.equal(await pass(later), 'SWARM_ERR_DISK_FULL', 'a second batch refused');
  full(false);
  s.close();
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  const all = [...a, ...b];
  // What a client reads: GET /tasks/:id is store.lookup, `swarm results` is readArchive. Read at the
  // clock's time: both batches left the hot state now (a and b's windows count from their records,
  // at `before` and at this start), and a pass two hours on would forget them.
  t.equal(await pass(Date.now()), '0 left', 'a pass after the restart has nothing to write');
  let lost = 0;
  for (const id of all) { const r = s.lookup(id); if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) lost++; }
  t.equal(lost, 0, 'lost 0: each answers done with its text (GET /tasks/:id)');
  await pass(later);
  await pass(later);
  onceEach('after the restart, and passes with everything due', all);
  t.equal(s.retention.hot_finished, 0, 'nothing left hot');
  const ev = evictRecords(dir);
  t.same(all.filter((id) => ev.get(id) !== 1).map((id) => `${id}:${ev.get(id) ?? 0}`), [], 'each task is in exactly one evict record in the journal');
  const shown = new Map<string, number>();
  const rep = readArchive(dir, {}, (x) => shown.set(x.id, (shown.get(x.id) ?? 0) + 1));
  t.same([shown.size, [...shown.values()].every((n) => n === 1), rep.repeated, rep.damaged], [all.length, true, 0, 0], 'readArchive shows each once, no repeated or damaged line skipped');
  const cli = swarm(['results', '--json', '--state-dir', dir]);
  const out = cli.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: string; result?: { text?: string } });
  t.same([cli.code, out.length, new Set(out.map((x) => x.id)).size, out.filter((x) => x.result?.text !== `answer ${x.id}`).length, cli.stderr.trim()], [0, all.length, all.length, 0, ''], 'swarm results --json: each task once with its text, nothing said');
});

t.test('a hub restarted while the journal still refuses starts, and records the lines written before once space frees', async (t) => {
  const dir = tempDir(t);
  const retain = { retain: { ageMs: 3600_000, count: 100_000 }, evictEveryMs: 3600_000 };
  let s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.teardown(() => s.close());
  const ids = Array.from({ length: 10 }, (_, i) => `r${i}`);
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  await finishAll(s, ids.length);
  const write = journalDiskFull(t);
  const later = Date.now() + 2 * 3600_000;
  const pass = () => s.evict(later).then((n) => `${n} left`, (e: { code?: string }) => e.code ?? 'failed');
  t.equal(await pass(), 'SWARM_ERR_DISK_FULL', 'the archive takes the batch, the journal refuses its evict record');
  s.close();
  // The journal still refuses: the start finds the lines past the covered end and cannot record
  // them. It used to fail the open (the hub stayed down until space freed).
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.equal(s.retention.hot_finished, 10, 'the hub starts, the 10 tasks hot');
  let lost = 0;
  for (const id of ids) { const r = s.lookup(id); if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) lost++; }
  t.equal(lost, 0, 'each answers from the hot state');
  t.equal(await pass(), 'SWARM_ERR_DISK_FULL', 'a pass owes their record and fails on it');
  t.same([...archiveLines(dir).values()].filter((n) => n !== 1), [], 'each line still written once');
  io.write = write;
  t.equal(await pass(), '10 left', 'space frees: the owed record, nothing written again');
  const lines = archiveLines(dir);
  t.same([lines.size, [...lines.values()].every((n) => n === 1)], [10, true], 'one archive line each');
  const ev = evictRecords(dir);
  t.same(ids.filter((id) => ev.get(id) !== 1), [], 'one evict record each');
  s.close();
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  // At the clock's time: a pass two hours on would let the duplicate window forget them.
  t.equal(await s.evict(), 0, 'a pass after it has nothing to do');
  lost = 0;
  for (const id of ids) { const r = s.lookup(id); if (r?.state !== 'done' || r.result?.text !== `answer ${id}`) lost++; }
  t.same([lost, s.retention.hot_finished, [...archiveLines(dir).values()].filter((n) => n !== 1).length, [...evictRecords(dir).values()].filter((n) => n !== 1).length], [0, 0, 0, 0], 'after another restart: lost 0, none hot, duplicated 0 in the archive and the journal');
});

t.test('a batch recorded late is remembered for a whole window from when it left the hot state, not from when its lines were written', async (t) => {
  const dir = tempDir(t);
  const ageMs = 3600_000;
  const retain = { retain: { ageMs, count: 100_000 }, evictEveryMs: 3600_000 };
  let s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.teardown(() => s.close());
  const ids = Array.from({ length: 10 }, (_, i) => `l${i}`);
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  await finishAll(s, ids.length);
  const answers = () => {
    const c = { same: 0, unknown: 0, other: 0 };
    for (const id of ids) { const r = s.lookup(id); if (!r) c.unknown++; else if (r.state === 'done' && r.result?.text === `answer ${id}`) c.same++; else c.other++; }
    return c;
  };
  const written = Date.now() + 2 * ageMs;
  const write = journalDiskFull(t);
  t.equal(await s.evict(written).catch((e: { code?: string }) => e.code), 'SWARM_ERR_DISK_FULL', 'the lines written, their evict record refused');
  io.write = write;
  // Space frees more than a window after the write: the tasks were hot (and answered) all along.
  const recorded = written + ageMs + 60_000;
  t.equal(await s.evict(recorded), 10, 'recorded at the next pass');
  t.equal(await s.evict(recorded + 1000), 0, 'a pass after it');
  t.same(answers(), { same: 10, unknown: 0, other: 0 }, 'each answers done with its text from the archive; none unknown (it was, once a pass pruned the window counted from the write)');
  s.close();
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  await s.evict(recorded + 1000);
  t.same(answers(), { same: 10, unknown: 0, other: 0 }, 'the same after a restart (the evict record carries when they left)');
  await s.evict(recorded + ageMs + 1);
  t.same(answers(), { same: 0, unknown: 10, other: 0 }, 'a window after they left, forgotten as any evicted id');
  t.same([...archiveLines(dir).values()].filter((n) => n !== 1), [], 'duplicated 0 in the archive');
});

t.test('lines a restart finds unrecorded are remembered for a whole window from that start, not from when they were written', async (t) => {
  const dir = tempDir(t);
  // Due by count (two kept hot), whatever the pass's clock: lines written "two hours ago".
  const retain = { retain: { ageMs: 3600_000, count: 2 }, evictEveryMs: 3600_000 };
  let s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.teardown(() => s.close());
  const ids = Array.from({ length: 12 }, (_, i) => `k${i}`);
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  await finishAll(s, ids.length);
  const write = journalDiskFull(t);
  t.equal(await s.evict(Date.now() - 2 * 3600_000).catch((e: { code?: string }) => e.code), 'SWARM_ERR_DISK_FULL', '10 lines written two hours ago, their evict record refused');
  io.write = write;
  s.close();
  s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
  t.equal(s.retention.hot_finished, 2, 'the start recorded the 10 lines it found');
  await s.evict();
  let same = 0, unknown = 0;
  for (const id of ids) { const r = s.lookup(id); if (!r) unknown++; else if (r.state === 'done' && r.result?.text === `answer ${id}`) same++; }
  t.same({ same, unknown }, { same: 12, unknown: 0 }, 'after a pass: each answers done with its text, none unknown');
  t.same([...archiveLines(dir).values()].filter((n) => n !== 1), [], 'duplicated 0 in the archive');
});
