import t from 'tap';
import { onGrid } from '../../worker/gossip/clock.js';

t.test('gossip timers of a second or more end on the wall-clock grid; shorter ones are left as they are', async (t) => {
  t.equal(onGrid(400, 10_100), 400, 'a probe timeout keeps its length');
  t.equal(onGrid(1500, 10_100), 1650, 'a second or more: on the 250 ms grid');
  t.equal(onGrid(3000, 10_100), 3900, 'two seconds or more: on whole seconds');
  t.equal(onGrid(2000, 10_000), 2000, 'already on the grid');
  for (const ms of [1000, 1234, 2500, 4000]) {
    const now = 1_700_000_000_123;
    const d = onGrid(ms, now);
    t.ok(d >= ms && d < ms + 1000, `${ms} lengthened by less than a step (${d})`);
  }
});
