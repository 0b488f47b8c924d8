import t from 'tap';
import { ThreadTuner, cpuLimit, idleCores, spareCore, startThreads, threadCap } from '../../drivers/batched/threads.js';

/**
 * Drive a tuner through simulated decode steps: `rate(threads)` is tokens per ms of decode for 8
 * sequences. Returns the tokens decoded over `ms` of decode time against the best fixed count's.
 */
function run(tuner: ThreadTuner, clock: { now: number }, ms: number, rate: (threads: number) => number, seen?: Set<number>): { share: number; last: number } {
  let tokens = 0;
  const best = Math.max(...[1, 2, 4, 8].map(rate));
  const end = clock.now + ms;
  while (clock.now < end) {
    const n = tuner.threads();
    seen?.add(n);
    const stepMs = 8 / rate(n);
    tuner.step(8, stepMs);
    clock.now += stepMs;
    tokens += 8;
  }
  return { share: tokens / (best * ms), last: tuner.threads() };
}

t.test('the tuner keeps all cores on a quiet machine and drops to one under a competing load, and back', async (t) => {
  const clock = { now: 0 };
  const tuner = new ThreadTuner({ max: 2, start: 2, now: () => clock.now });
  // Two cores: quiet, two threads decode 1.5x one; busy, two spinning threads collapse.
  const quiet = (n: number): number => (n >= 2 ? 3 : 2);
  const busy = (n: number): number => (n >= 2 ? 0.02 : 1);
  const q = run(tuner, clock, 60_000, quiet);
  t.equal(q.last, 2, 'quiet: two threads');
  t.ok(q.share >= 0.95, `quiet: ${q.share.toFixed(3)} of the best fixed count`);
  const b = run(tuner, clock, 60_000, busy);
  t.equal(b.last, 1, 'loaded: one thread');
  t.ok(b.share >= 0.8, `loaded: ${b.share.toFixed(3)} of the best fixed count`);
  const back = run(tuner, clock, 60_000, quiet);
  t.equal(back.last, 2, 'the load gone: two threads again');
  t.ok(back.share >= 0.9, `after the load: ${back.share.toFixed(3)} of the best`);
});

t.test('the tuner started low climbs to where more threads pay, and no further', async (t) => {
  const clock = { now: 0 };
  const tuner = new ThreadTuner({ max: 8, start: 1, now: () => clock.now });
  // Eight cores, four of them free: up to 4 threads help, 8 spin against the others.
  const r = run(tuner, clock, 120_000, (n) => (n <= 4 ? n : 0.5));
  t.equal(r.last, 4);
  t.ok(r.share >= 0.8, `${r.share.toFixed(3)} of the best fixed count`);
});

t.test('prompt batches and empty steps teach the tuner nothing', async (t) => {
  const tuner = new ThreadTuner({ max: 4, start: 2, now: () => 0 });
  tuner.step(0, 5);
  tuner.step(8, 0);
  t.same(tuner.rates(), {});
  t.equal(tuner.threads(), 2);
});

t.test('the starting count is within the CPUs this process may use', async (t) => {
  const limit = cpuLimit();
  t.ok(limit >= 1);
  const n = await startThreads(limit, 20);
  t.ok(n >= 1 && n <= limit, `${n} of ${limit}`);
  t.equal(await startThreads(1), 1);
});

t.test('with no idle core the tuner does not probe more threads (a probe would only spin), but still probes fewer', async (t) => {
  const clock = { now: 0 };
  const tuner = new ThreadTuner({ max: 2, start: 1, now: () => clock.now, freeCores: () => 0 });
  const tried = new Set<number>();
  const r = run(tuner, clock, 60_000, (n) => (n >= 2 ? 0.02 : 1), tried);
  t.same([...tried], [1], 'two threads never tried');
  t.ok(r.share >= 0.99, `${r.share.toFixed(3)} of the best fixed count`);
  const down = new ThreadTuner({ max: 2, start: 2, now: () => clock.now, freeCores: () => 0 });
  t.equal(run(down, clock, 30_000, (n) => (n >= 2 ? 0.02 : 1)).last, 1, 'a count that collapsed is left for fewer');
});

t.test('a core is left to the swarm beside the engine from four CPUs up', async (t) => {
  t.equal(threadCap(1), 1);
  t.equal(threadCap(2), 2);
  t.equal(threadCap(3), 3);
  t.equal(threadCap(4), 3);
  t.equal(threadCap(16), 15);
  t.ok(threadCap() >= 1 && threadCap() <= cpuLimit());
});

t.test('idle cores are measured from the moment the reader is made: its first answer already guards a probe', async (t) => {
  const times = [{ idle: 100, total: 1000 }, { idle: 110, total: 1200 }, { idle: 310, total: 1400 }];
  const free = idleCores(() => times.shift(), 2, null);
  t.equal(free(), 0.1, 'the first call: 10 of 200 ticks idle on 2 CPUs');
  t.equal(free(), 2, 'then since the previous call');
  t.equal(free(), undefined, 'unreadable: not known');
  t.equal(idleCores(() => undefined, 2, null)(), undefined);
});

t.test('spareCore: overlap only from four CPUs, with a CPU beside the decode threads and a core idle, held until under half of one', async (t) => {
  let threads = 2, idle: number | undefined = 1.2, clock = 0;
  const reads: number[] = [];
  const spare = spareCore(() => threads, 4, () => { reads.push(clock); return idle; }, 500, () => clock);
  t.equal(spare(), true, 'a core of four idle beside two threads');
  idle = 0.7;
  clock = 100;
  t.equal(spare(), true, 'not read again within 500 ms');
  clock = 600;
  t.equal(spare(), true, 'held at 0.7 of a core idle (its own main thread takes some)');
  idle = 0.3;
  clock = 1200;
  t.equal(spare(), false, 'off under half a core idle');
  idle = 0.8;
  clock = 1800;
  t.equal(spare(), false, 'back on only at a whole idle core');
  idle = 1.5;
  clock = 2400;
  t.equal(spare(), true);
  threads = 3;
  t.equal(spare(), true, 'three threads of four: still a CPU beside them');
  threads = 4;
  t.equal(spare(), false, 'never with a decode thread on every CPU, whatever idles');
  t.equal(spareCore(() => 1, 2, () => 2, 500, () => 0)(), false, 'never on 2 CPUs');
  t.equal(spareCore(() => 1, 3, () => 2, 500, () => 0)(), false, 'nor on 3');
  threads = 2;
  idle = undefined;
  clock = 3000;
  t.equal(spare(), false, 'off where the idle time cannot be read');
  t.same(reads, [0, 600, 1200, 1800, 2400, 3000], 'the idle time read once per interval');
});

t.test('past halving and doubling the tuner tries the counts between: it finds a best that is neither', async (t) => {
  // Sixteen cores, fifteen threads at most: the rate peaks at 10 (a small model's barriers), 7 does 0.86x
  // of it, 14 0.89x, 15 0.80x. Halving and doubling alone settle at 7 and never try 8-13.
  const rate = (n: number): number => 3 - 0.02 * (n - 10) ** 2;
  const clock = { now: 0 };
  const tuner = new ThreadTuner({ max: 15, start: 15, now: () => clock.now });
  const tried = new Set<number>();
  let tokens = 0;
  const ms = 300_000;
  while (clock.now < ms) {
    const n = tuner.threads();
    tried.add(n);
    const stepMs = 8 / rate(n);
    tuner.step(8, stepMs);
    clock.now += stepMs;
    tokens += 8;
  }
  const best = Math.max(...Array.from({ length: 15 }, (_, i) => rate(i + 1)));
  t.ok(Math.abs(tuner.threads() - 10) <= 1, `settled at ${tuner.threads()} (the best is 10; tried ${[...tried].sort((a, b) => a - b).join(', ')})`);
  t.ok(tokens / (best * ms) >= 0.97, `${(tokens / (best * ms)).toFixed(3)} of the best fixed count over 5 min, probes included (halving and doubling alone: 0.94)`);
});

t.test('four CPUs (three threads at most): two threads are tried too', async (t) => {
  const clock = { now: 0 };
  const tuner = new ThreadTuner({ max: 3, start: 3, now: () => clock.now });
  const tried = new Set<number>();
  // Two threads best: the third shares a core with the swarm's other processes.
  run(tuner, clock, 120_000, (n) => (n === 2 ? 2 : n === 3 ? 1.6 : 1.2), tried);
  t.ok(tried.has(2), `tried ${[...tried].join(', ')}`);
  t.equal(tuner.threads(), 2);
});

t.test('a load arriving: the tuner never switches up to a count whose rate it measured while the machine was quiet', async (t) => {
  const clock = { now: 0 };
  let free = 2;
  const tuner = new ThreadTuner({ max: 4, start: 2, now: () => clock.now, freeCores: () => free });
  // Quiet: two threads best, three close behind (within the 5% a probe must win by), one and four far behind.
  const quiet: Record<number, number> = { 1: 0.5, 2: 2, 3: 2.05, 4: 1.5 };
  const tried = new Set<number>();
  run(tuner, clock, 120_000, (n) => quiet[n]!, tried);
  t.equal(tuner.threads(), 2, 'quiet: two threads');
  t.ok(tried.has(3), 'and three was probed (its rate is known)');
  // Loaded, no core idle: two threads still best but at a third of their rate; three and four collapse.
  // Three's rate from the quiet minutes beats two's now: switching to it would only spin.
  free = 0;
  const loaded: Record<number, number> = { 1: 0.45, 2: 0.6, 3: 0.05, 4: 0.02 };
  const counts = new Set<number>();
  run(tuner, clock, 60_000, (n) => loaded[n]!, counts);
  t.same([...counts].filter((n) => n > 2), [], `loaded: no count above two run (ran ${[...counts].join(', ')})`);
  t.equal(tuner.threads(), 2);
});
