import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { TaskStore } from '../../hub/store.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { swarm, tempDir } from '../helpers/cli.js';

/**
 * The hub dies between the archive write and the journal's evict record: on restart the tasks are
 * hot again (the journal has them done), and the next pass used to archive them a second time. The
 * restart finishes the interrupted eviction instead: each id is in the archive once.
 */

const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const s = { retain: { ageMs: 3600_000, count: 5 }, evictEveryMs: 3600_000 };

async function runAll(store: TaskStore, ids: string[]): Promise<void> {
  await store.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  for (;;) {
    const rec = store.lease({ id: 'w', caps: [] });
    if (!rec) break;
    await store.complete(rec.id, { text: `answer ${rec.id}`, worker: 'w', attempt: rec.attempts });
  }
}

/** Every archive line's id, repeats included (not the deduplicating reader). */
function archivedIds(dir: string): string[] {
  const out: string[] = [];
  for (const [, f] of archiveFiles(archiveDir(dir))) {
    for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
      const m = /"id":"([^"]+)"/.exec(line);
      if (m) out.push(m[1]!);
    }
  }
  return out;
}

/** Cut the live journal segment before its last evict record: as if the hub died right before writing it. */
function cutLastEvict(dir: string): void {
  const file = path.join(dir, 'journal.ndjson');
  const text = fs.readFileSync(file, 'utf8');
  const at = text.lastIndexOf('{"t":"evict"');
  if (at < 0) throw new Error('no evict record to cut');
  fs.truncateSync(file, Buffer.byteLength(text.slice(0, at)));
}

const counts = (ids: string[]) => { const m = new Map<string, number>(); for (const id of ids) m.set(id, (m.get(id) ?? 0) + 1); return m; };

t.test('a crash between the archive write and the evict record archives no task twice', async (t) => {
  const dir = tempDir(t);
  const first = Array.from({ length: 20 }, (_, i) => `a${i}`);
  let store = await TaskStore.open(dir, q, j, s);
  await runAll(store, first);
  t.equal(await store.evict(), 15, 'fifteen over the horizon of five');
  // A second round, whose evict record the crash takes.
  const second = Array.from({ length: 10 }, (_, i) => `b${i}`);
  await runAll(store, second);
  t.equal(await store.evict(), 10);
  await store.close();
  cutLastEvict(dir);

  store = await TaskStore.open(dir, q, j, s);
  t.equal(store.queue.counts().done, 5, 'after the restart the hot state holds the horizon only: the archived ten left it');
  t.ok(store.knows('a19') && !store.queue.has('a19'), 'an archived task is remembered, not hot');
  t.equal(store.lookup('a19')?.result?.text, 'answer a19', 'and read back from its one archive line');
  t.equal(await store.evict(), 0, 'the next pass has nothing to archive');
  // More work after the restart, evicted as usual.
  const third = Array.from({ length: 10 }, (_, i) => `c${i}`);
  await runAll(store, third);
  t.equal(await store.evict(), 10);
  await store.close();

  // A second restart (the recovered eviction is in the journal now): still once each.
  store = await TaskStore.open(dir, q, j, s);
  t.equal(store.queue.counts().done, 5);
  t.equal(await store.evict(), 0);
  await store.compact();
  await store.close();
  store = await TaskStore.open(dir, q, j, s);
  t.equal(await store.evict(), 0, 'after a compaction too (the snapshot carries the covered end)');
  await store.close();

  const ids = archivedIds(dir);
  const twice = [...counts(ids)].filter(([, n]) => n > 1).map(([id]) => id);
  t.same(twice, [], 'no id archived twice');
  t.equal(new Set(ids).size, 35, 'every evicted task is archived');
  const out = swarm(['results', '--json', '--state-dir', dir]);
  t.equal(out.code, 0, out.stderr);
  const listed = out.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { id: string }).id);
  t.equal(listed.length, 35, 'swarm results lists each archived id once');
  t.equal(new Set(listed).size, listed.length);
});

t.test('a task resubmitted after its window and finished again is not taken for the archived one', async (t) => {
  const dir = tempDir(t);
  let store = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 1 }, evictEveryMs: 3600_000 });
  await runAll(store, ['x', 'y']);
  t.equal(await store.evict(), 1);
  await store.close();
  cutLastEvict(dir);
  // The journal no longer knows `x` left; a later submission time stands for a newer run of it.
  const file = path.join(dir, 'journal.ndjson');
  const lines = fs.readFileSync(file, 'utf8').split('\n').map((l) => {
    if (!l.includes('"t":"task"') || !l.includes('"id":"x"')) return l;
    const r = JSON.parse(l.replace(/,"_n":.*\}$/, '}')) as { at: number };
    return JSON.stringify({ ...r, at: r.at + 1 });
  });
  fs.writeFileSync(file, lines.join('\n'));
  store = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 1 }, evictEveryMs: 3600_000 });
  t.teardown(() => store.close());
  t.ok(store.queue.has('x'), 'a hot task submitted after the archived one stays hot');
});
