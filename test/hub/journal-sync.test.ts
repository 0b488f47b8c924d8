import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { Journal } from '../../hub/journal.js';
import { readJournalFile } from '../../hub/journal-files.js';
import { tempDir } from '../helpers/cli.js';

/** The open-file flags of this process's descriptor on `file` (from /proc/self/fdinfo), or undefined. */
function flagsOf(file: string): number | undefined {
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    let target: string;
    try { target = fs.readlinkSync(`/proc/self/fd/${fd}`); } catch { continue; }
    if (target !== file) continue;
    const m = /^flags:\s+([0-7]+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
    if (m) return parseInt(m[1]!, 8);
  }
  return undefined;
}

const DSYNC = fs.constants.O_DSYNC;

t.test('always: the live segment is written with O_DSYNC (one trip per group commit), before and after a compaction', async (t) => {
  const dir = tempDir(t);
  const { journal } = Journal.open(dir, { fsyncMs: 0 });
  const file = path.join(dir, 'journal.ndjson');
  t.ok((flagsOf(file) ?? 0) & DSYNC, 'O_DSYNC on the live segment');
  await journal.append({ t: 'meta', kind: 'probe', data: { n: 1 }, at: 1 });
  journal.setSnapshotSource(() => []);
  await journal.compact();
  t.ok((flagsOf(file) ?? 0) & DSYNC, 'and on the segment a compaction opens');
  await journal.append({ t: 'meta', kind: 'probe', data: { n: 2 }, at: 2 });
  await journal.close();
  const back = readJournalFile(file, { checked: false });
  t.same(back.records.map((r) => (r as { data?: { n?: number } }).data?.n), [2], 'the append after the compaction is in the new segment, whole');
  t.equal(back.damage.length, 0);
});

t.test('interval: no O_DSYNC (the timer fsyncs); appends still land whole', async (t) => {
  const dir = tempDir(t);
  const { journal } = Journal.open(dir, { fsync: 'interval', fsyncMs: 1000 });
  const file = path.join(dir, 'journal.ndjson');
  const flags = flagsOf(file);
  t.ok(flags !== undefined, 'the segment is open');
  t.notOk((flags ?? 0) & DSYNC, 'plain appends');
  await Promise.all([1, 2, 3].map((n) => journal.append({ t: 'meta', kind: 'probe', data: { n }, at: n })));
  await journal.close();
  t.same(readJournalFile(file, { checked: false }).records.map((r) => (r as { data?: { n?: number } }).data?.n), [1, 2, 3]);
});
