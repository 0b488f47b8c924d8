import t from 'tap';
import { every } from '../../protocol/index.js';

t.test('callbacks of one period registered at different times run in the same wake-up; a stopped one no more', async (t) => {
  // The clock's timer is unref'd (it never keeps a process alive): this one keeps the test's.
  const alive = setInterval(() => {}, 1000);
  t.teardown(() => clearInterval(alive));
  let inTick = false;
  const seen: string[] = [];
  let sameTick = 0;
  const stopA = every(100, () => {
    seen.push('a');
    inTick = true;
    setImmediate(() => { inTick = false; });
  });
  await new Promise((r) => setTimeout(r, 30));
  let stopB: () => void = () => {};
  const bothRan = new Promise<void>((resolve) => {
    stopB = every(100, () => {
      seen.push('b');
      if (inTick) sameTick++;
      if (sameTick >= 2) resolve();
    });
  });
  await bothRan;
  t.ok(sameTick >= 2, 'b ran in the wake-up that ran a');
  stopA();
  stopA(); // idempotent
  const before = seen.filter((x) => x === 'a').length;
  await new Promise((r) => setTimeout(r, 250));
  t.equal(seen.filter((x) => x === 'a').length, before, 'a stopped');
  t.ok(seen.filter((x) => x === 'b').length >= 3, 'b still runs');
  stopB();
});
