import t from 'tap';
import { PLAIN_EVERY_MS, Progress } from '../../cli/progress.js';

t.test('without a terminal, progress is written at most every 5 s, and its last state when done', async (t) => {
  let now = 0;
  const out: string[] = [];
  const p = new Progress(false, { tty: false, write: (s) => out.push(s), now: () => now });
  // A 28 s run redrawn every 0.25 s: 112 updates.
  for (let i = 0; i < 112; i++) { p.update(`running ${i}`); now += 250; }
  p.done();
  t.ok(out.length <= Math.ceil(28_000 / PLAIN_EVERY_MS) + 1, `${out.length} lines`);
  t.equal(out[0], 'running 0\n');
  t.equal(out.at(-1), 'running 111\n', 'the final state is shown');
});

t.test('a terminal redraws every change in place', async (t) => {
  const out: string[] = [];
  const p = new Progress(false, { tty: true, write: (s) => out.push(s), now: () => 0 });
  p.update('a'); p.update('b'); p.done();
  t.same(out, ['\r\x1b[2Ka', '\r\x1b[2Kb', '\n']);
});
