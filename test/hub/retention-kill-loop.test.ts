import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TaskStore } from '../../hub/index.js';
import { Retention, firstPassDelay } from '../../hub/retention.js';
import { Checker } from '../helpers/checker.js';
import { hotAndArchived, runJournalChild, toldByChild } from '../helpers/journal-child.js';

/**
 * After an open, the first retention pass waits (SETTLE_AFTER_OPEN_MS) so a restart is quick. A hub
 * killed every few seconds never reached that pass, and its hot state grew with every life. The wait
 * is skipped when the journal shows the lives before missed their passes.
 */

t.test('the first pass waits after a crash of a long-lived hub, and not after lives that missed their passes', async (t) => {
  const r = new Retention({ ageMs: 3600_000, count: 2 });
  t.equal(firstPassDelay(r, 0, 5000), 0, 'nothing finished: no wait needed');
  r.load(['a', 'b'], [1000, 2000]);
  t.equal(firstPassDelay(r, 2000, 5000), 5000, 'nothing past the horizon: the usual wait');
  r.load(['a', 'b', 'c'], [1000, 2000, 100_000]);
  t.equal(r.dueSince(), 100_000, 'a went past the count when c finished');
  t.equal(firstPassDelay(r, 100_500, 5000), 5000, 'past the horizon just before the crash: the usual wait');
  t.equal(firstPassDelay(r, 200_000, 5000), 0, 'past the horizon for 100 s while hubs wrote: at once');
  const old = new Retention({ ageMs: 10_000, count: 100 });
  old.load(['a'], [1000]);
  t.equal(firstPassDelay(old, 1000, 5000), 5000, 'past its age only while no hub ran (a long stop): the usual wait');
});

t.test('a store killed every ~2 s keeps its hot state bounded, and loses and duplicates nothing', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-retention-kills-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const COUNT = 40;
  const check = new Checker();
  const donePerRound: number[] = [];
  let next = 0;
  // Bounded: 10 lives of about 2 s each, with the store's default wait (5 s) before its first pass.
  for (let round = 0; round < 10; round++) {
    const r = await runJournalChild(dir, '', 'forever', [String(next), String(COUNT), '5000'], 2000);
    t.equal(r.signal, 'SIGKILL', `round ${round}: killed`);
    const nums = toldByChild(check, r.out);
    donePerRound.push(r.out.split('\n').filter((l) => l.startsWith('done ')).length);
    next = Math.max(next, ...nums.map((n) => n + 10)) + 10;
  }
  const s = await TaskStore.open(dir, { maxDepth: 1_000_000, leaseMs: 60_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 },
    { retain: { ageMs: 3600_000, count: COUNT }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  const hot = s.queue.counts().done;
  const total = donePerRound.reduce((a, b) => a + b, 0);
  // The lives before each open that skips the wait: what finished in the wait's 5 s of writing (2-3
  // lives) is all a missed pass leaves hot, so the last four lives bound it.
  const bound = COUNT + donePerRound.slice(-4).reduce((a, b) => a + b, 0);
  t.ok(total > bound, `the lives finished more than the bound (${total} finished, ${donePerRound.join(',')} by life)`);
  t.ok(hot <= bound, `${hot} finished tasks hot after 10 lives, at most ${bound} (the count and the last four lives' results)`);
  const { final, records } = hotAndArchived(dir, s);
  const v = check.check(final, { expect: (id) => `r ${id}`, resultRecords: records });
  t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed, unexpected: v.unexpected }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0 }, v.details.join('; '));
});
