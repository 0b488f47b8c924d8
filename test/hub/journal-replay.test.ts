import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { TaskStore } from '../../hub/store.js';
import { journalStatus } from '../../hub/journal-report.js';
import { tempDir } from '../helpers/cli.js';

const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const w = { id: 'w', caps: [] as string[] };
const open = (dir: string) => TaskStore.open(dir, q, j, { evictEveryMs: 3600_000 });
const journal = (dir: string) => path.join(dir, 'journal.ndjson');

/** Tasks a, b, c with results for a and b, in the live segment. */
async function seed(dir: string): Promise<void> {
  const s = await open(dir);
  await s.submitMany(['a', 'b', 'c'].map((id) => ({ id, prompt: `p-${id}` })));
  for (const id of ['a', 'b']) { s.lease(w); await s.complete(id, { text: `done-${id}`, worker: 'w', attempt: 1 }); }
  await s.close();
}

/** Flip one byte inside the line that contains `needle`. */
function flip(file: string, needle: string): void {
  const buf = fs.readFileSync(file);
  const at = buf.indexOf(needle);
  buf[at + needle.length - 1]! ^= 0x01;
  fs.writeFileSync(file, buf);
}

t.test('a damaged task line: its intact result is counted, kept through compaction, and answers a resubmit', async (t) => {
  const dir = tempDir(t);
  await seed(dir);
  flip(journal(dir), '"prompt":"p-a"');
  const s = await open(dir);
  t.equal(s.damage.records, 1, 'the damaged task line is quarantined and counted');
  t.equal(s.damage.orphans, 1, 'its result line, intact, is counted as an orphan');
  t.equal(journalStatus(s)?.orphan_records, 1, 'and reported in the status');
  await s.compact();
  await s.close();
  t.match(fs.readFileSync(path.join(dir, 'snapshot.ndjson'), 'utf8'), /done-a/, 'the result is in the snapshot, not dropped');

  const s2 = await open(dir);
  t.teardown(() => s2.close());
  t.equal(s2.damage.orphans, 1, 'still there after the compaction');
  const [again] = await s2.submitMany([{ id: 'a', prompt: 'p-a' }]);
  t.equal(again!.record.state, 'done', 'a resubmit of the id gets the recorded result');
  t.equal(again!.record.result?.text, 'done-a');
  t.equal(s2.queue.counts().queued, 1, 'only c waits; a does not run again');
});

t.test('a checksum-less line appended to a checksummed journal is damage, never served nor laundered', async (t) => {
  const dir = tempDir(t);
  await seed(dir);
  fs.appendFileSync(journal(dir), JSON.stringify({ t: 'result', id: 'c', text: 'forged', worker: 'x', attempt: 1, at: 1 }) + '\n');
  const s = await open(dir);
  t.equal(s.damage.records, 1, 'counted as damage');
  t.match(s.damage.samples[0]?.why ?? '', /no checksum after checksummed records/);
  t.equal(s.queue.get('c')!.state, 'queued', 'not served as the result');
  await s.compact();
  await s.close();
  t.notMatch(fs.readFileSync(path.join(dir, 'snapshot.ndjson'), 'utf8'), /forged/, 'not written into the snapshot');
  t.match(fs.readFileSync(path.join(dir, 'journal.quarantine.ndjson'), 'utf8'), /forged/, 'the quarantine keeps it');
});

t.test('an old journal without checksums replays, and a compaction does not vouch for it', async (t) => {
  const dir = tempDir(t);
  const old = [
    { t: 'task', spec: { id: 'o1', prompt: 'P', priority: 0 }, at: 1 },
    { t: 'task', spec: { id: 'o2', prompt: 'Q', priority: 0 }, at: 2 },
    { t: 'result', id: 'o1', text: 'R', worker: 'w', attempt: 1, at: 3 },
  ];
  fs.writeFileSync(journal(dir), old.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const s = await open(dir);
  t.equal(s.legacyRecords, 3);
  t.equal(s.damage.records, 0, 'no checksum is not damage in an old journal');
  t.equal(s.queue.get('o1')!.result!.text, 'R');
  t.equal(s.queue.get('o2')!.state, 'queued');
  await s.submitMany([{ id: 'n1', prompt: 'new' }]);
  await s.compact();
  await s.close();
  const s2 = await open(dir);
  t.teardown(() => s2.close());
  t.equal(s2.legacyRecords, 3, 'after compaction the three records are still reported as unchecked');
  t.equal(s2.damage.records, 0);
  t.equal(s2.queue.get('o1')!.result?.text, 'R');
  t.ok(s2.queue.has('n1'));
});

t.test('a snapshot cut short or emptied after it was written is reported, not taken as the whole state', async (t) => {
  for (const cut of ['half', 'empty'] as const) {
    const dir = tempDir(t);
    const s0 = await open(dir);
    await s0.submitMany(Array.from({ length: 200 }, (_, i) => ({ id: `s${i}`, prompt: `p-${i} ${'x'.repeat(200)}` })));
    await s0.compact();
    await s0.close();
    const snap = path.join(dir, 'snapshot.ndjson');
    const whole = await open(dir);
    t.equal(whole.damage.records, 0, `${cut}: a whole snapshot (its end mark read) is no damage`);
    t.equal([...whole.queue.all()].length, 200, `${cut}: all 200 replayed`);
    await whole.close();
    fs.truncateSync(snap, cut === 'half' ? Math.floor(fs.statSync(snap).size / 2) : 0);
    const s = await open(dir);
    const why = s.damage.samples.map((d) => d.why).join('; ');
    t.match(why, /snapshot ends without its end mark/, `${cut}: reported (${s.damage.records} damage entries)`);
    t.ok([...s.queue.all()].length < 200, `${cut}: ${[...s.queue.all()].length} of 200 came back`);
    await s.close();
  }
});
