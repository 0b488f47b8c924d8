import t from 'tap';
import { retainLine } from '../../cli/commands/status.js';

const MiB = 2 ** 20;
const retain = { ageMs: 86_400_000, count: 100_000, bytes: 64 * MiB };

t.test('status says when new tasks are refused because the archive fell behind, as the hub says it', async (t) => {
  const ok = retainLine({ retain, hot_finished: 900, hot_bytes: 10 * MiB, evicted: 0, refused_behind: 0, behind: false, ceiling_bytes: 96 * MiB });
  t.notMatch(ok, /REFUSED|refused/, 'nothing refused: nothing said');
  const now = retainLine({ retain, hot_finished: 9_000, hot_bytes: 97 * MiB, evicted: 0, refused_behind: 3, behind: true, ceiling_bytes: 96 * MiB });
  t.match(now, /NEW TASKS REFUSED NOW \(SWARM_ERR_QUEUE_FULL\): past 96(\.0)? MiB hot while the archive catches up, 3 submission\(s\) refused since start/);
  const failing = retainLine({ retain, hot_finished: 9_000, hot_bytes: 97 * MiB, evicted: 0, refused_behind: 1, behind: true, ceiling_bytes: 96 * MiB, last_error: 'ENOSPC: no space left on device, write' });
  t.match(failing, /REFUSED NOW .* while archive writes fail \(ENOSPC: no space left on device, write\)/, 'a failing archive is named, not "catching up"');
  const since = retainLine({ retain, hot_finished: 900, hot_bytes: 50 * MiB, evicted: 0, refused_behind: 3, behind: false, ceiling_bytes: 96 * MiB });
  t.match(since, /; 3 submission\(s\) refused since start while the archive was behind \(past 96(\.0)? MiB hot\)$/);
  t.notMatch(since, /NOW/);
  t.notMatch(retainLine({ retain, hot_finished: 1, hot_bytes: 200 * MiB, evicted: 0 }), /refused|REFUSED/i, 'a hub before these fields: nothing said, whatever it holds');
});
