import t from 'tap';
import { retainLine } from '../../cli/commands/status.js';
import { hotCeiling } from '../../hub/retention.js';

const MiB = 2 ** 20;
const retain = { ageMs: 86_400_000, count: 100_000, bytes: 64 * MiB };

t.test('status says when new tasks are refused because the archive fell behind', async (t) => {
  const ok = retainLine({ retain, hot_finished: 900, hot_bytes: 10 * MiB, evicted: 0, refused_behind: 0 });
  t.notMatch(ok, /REFUSED|refused/, 'nothing refused: nothing said');
  t.equal(hotCeiling(64 * MiB), 96 * MiB, 'the ceiling at the default bound');
  const now = retainLine({ retain, hot_finished: 9_000, hot_bytes: 97 * MiB, evicted: 0, refused_behind: 3 });
  t.match(now, /NEW TASKS REFUSED NOW \(SWARM_ERR_QUEUE_FULL\): past 96(\.0)? MiB hot while the archive catches up, 3 submission\(s\) refused since start/);
  const since = retainLine({ retain, hot_finished: 900, hot_bytes: 50 * MiB, evicted: 0, refused_behind: 3 });
  t.match(since, /; 3 submission\(s\) refused since start while the archive caught up \(past 96(\.0)? MiB hot\)$/);
  t.notMatch(since, /NOW/);
  t.notMatch(retainLine({ hot_finished: 1, evicted: 0 }), /refused/, 'a hub before the counter: nothing said');
});
