import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { mainThreadSched, threadSched } from '../../bench/proc.js';
import { ROOT } from '../helpers/paths.js';

/** bench/proc.ts holds the benches' /proc readers: one schedstat reader, which engine-sched.ts uses. */

t.test('threadSched reads every thread of a process, and its main thread as mainThreadSched does', async (t) => {
  let x = 0;
  for (let i = 0; i < 2e6; i++) x += i; // some CPU on the main thread
  t.ok(x > 0);
  const all = threadSched(process.pid);
  const main = all.get(process.pid);
  t.ok(main, 'the main thread is there');
  t.ok(main!.run > 0, `it ran ${main!.run} ms`);
  t.ok(main!.sleeps >= 0 && Number.isInteger(main!.sleeps), 'its voluntary context switches are counted');
  t.ok(mainThreadSched(process.pid).run >= main!.run, 'mainThreadSched reads the same counter (later, so no less)');
  t.same(mainThreadSched(2 ** 30), { run: 0, wait: 0 }, 'a process that is gone reads as zeros');
});

t.test('no bench reads schedstat beside bench/proc.ts', async (t) => {
  const dir = path.join(ROOT, 'bench');
  const others = fs.readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'proc.ts' && /readFileSync\([^)]*schedstat/.test(fs.readFileSync(path.join(dir, f), 'utf8')));
  t.same(others, [], 'one schedstat reader');
});
