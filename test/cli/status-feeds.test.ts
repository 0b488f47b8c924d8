import t from 'tap';
import { feedLines } from '../../cli/commands/status-feeds.js';

/** `swarm status` shows each holder's feed: whether it is behind, and why (the link, the hub's loop, the bound); what waits in JSON characters, as the hub counts it, not as bytes. */

t.test('a line per holder\'s feed, with its waits, yields and what waits for its link', async (t) => {
  const lines = feedLines([
    { holder: 'w-1', syncing: false, backlog: 0, frames: 1200, syncs: 1, overflows: 0, waits: 40, yields: 3, skipped: 0, synced: 5000, bare: 0, oversize: 1 },
    { holder: 'w-2', syncing: true, backlog: 3 << 20, frames: 900, syncs: 3, overflows: 2, waits: 410, yields: 95, skipped: 12, synced: 9000, bare: 4000, oversize: 0 },
  ], { behindResumed: 2, behindRestarted: 0, rescans: 0 });
  t.equal(lines.length, 3, 'a summary, then one line per holder');
  t.match(lines[0], /fell behind 2 time\(s\): 2 resumed from a mark, 0 synced from zero, 0 passes over the hot state/);
  t.match(lines[1], /w-1: in sync, 0 characters of JSON waiting; 1,200 frames, 1 syncs, 0 fell behind, 40 waits for the link, 3 yields to the loop, 1 flushes over the bound sent whole/);
  t.match(lines[2], /w-2: SYNCING, 3.1M characters of JSON waiting; .* 2 fell behind, 410 waits for the link, 95 yields to the loop; 9,000 entries synced \(4,000 without spec\), 12 deltas left to a sync/);
  t.notMatch(lines[2], /over the bound/, 'no oversize flush: not mentioned');
});

t.test('a hub before these fields: what it has, no line for a swarm without holders', async (t) => {
  const lines = feedLines([{ holder: 'w-1', syncing: true, frames: 5, syncs: 1, overflows: 0, skipped: 0, synced: 5, bare: 0 }]);
  t.match(lines[1], /w-1: SYNCING; 5 frames, 1 syncs, 0 fell behind, 0 waits for the link, 0 yields to the loop;/);
  t.same(feedLines([]), []);
});

t.test('holders in sync that never fell behind: one line, the counters left to --json', async (t) => {
  const f = { syncing: false, backlog: 100, frames: 3, syncs: 1, overflows: 0, waits: 0, yields: 0, skipped: 0, synced: 0, bare: 0 };
  t.same(feedLines([{ holder: 'w-1', ...f }, { holder: 'w-2', ...f }], { behindResumed: 0, behindRestarted: 0, rescans: 0 }), ['feeds    2 holder(s) in sync (w-1, w-2), none fell behind']);
  t.equal(feedLines([{ holder: 'w-1', ...f, backlog: 2 << 20 }]).length, 2, 'much waiting for a link: the details');
  t.equal(feedLines([{ holder: 'w-1', ...f }], { rescans: 1 }).length, 2, 'a pass over the hot state since start: the details');
});

t.test('keepers of the open tasks are named as keepers', async (t) => {
  const f = { syncing: false, backlog: 0, frames: 3, syncs: 1, overflows: 0, skipped: 0, synced: 3, bare: 0 };
  t.same(feedLines([{ holder: 'w-1', ...f }, { holder: 'w-4', keeper: true, ...f }]), ['feeds    1 holder(s) and 1 keeper(s) of the open tasks in sync (w-1, w-4), none fell behind']);
  const lines = feedLines([{ holder: 'w-1', ...f }, { holder: 'w-4', keeper: true, ...f, overflows: 2 }], { behindResumed: 2 });
  t.match(lines[0], /^feeds    1 holder\(s\) and 1 keeper\(s\)/);
  t.match(lines[2], /^  w-4 \(keeper\): in sync.*2 fell behind/);
});
