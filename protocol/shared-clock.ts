/**
 * Periodic callbacks of one period share one timer in the process. Each timer wakes the process on
 * its own: 25 agents of a worker process with a heartbeat timer each woke it 12 times a second while
 * it had nothing to do, and each beat reached the hub apart, waking it too. On one clock they go out
 * in one wake-up, and arrive together. unref'd: a clock never keeps a process alive.
 */
interface Clock { timer?: NodeJS.Timeout; fns: Set<() => void> }
const clocks = new Map<number, Clock>();

/** Call `fn` every `ms` on the process's clock of that period; returns the function that stops it. */
export function every(ms: number, fn: () => void): () => void {
  let clock = clocks.get(ms);
  if (!clock) {
    const fns = new Set<() => void>();
    const run = (): void => {
      for (const f of [...fns]) {
        // One callback that throws must not silence the others on the clock.
        try { f(); } catch (err) { queueMicrotask(() => { throw err; }); }
      }
    };
    // The clock ticks on multiples of its period of the wall clock, so that clocks and other timers
    // kept on that grid (worker/gossip/clock.ts) fall due in the same wake-up.
    const c: Clock = { fns };
    // Re-armed for the next multiple each time rather than an interval, which drifts off the grid by
    // however late each tick ran.
    const arm = (): void => {
      let wait = ms - (Date.now() % ms);
      if (wait < 5) wait += ms; // just past a tick (this one ran a hair early): the next
      c.timer = setTimeout(() => { arm(); run(); }, wait);
      c.timer.unref();
    };
    arm();
    clock = c;
    clocks.set(ms, clock);
  }
  const c = clock;
  c.fns.add(fn);
  let on = true;
  return () => {
    if (!on) return;
    on = false;
    c.fns.delete(fn);
    if (c.fns.size === 0 && clocks.get(ms) === c) { clearTimeout(c.timer); clocks.delete(ms); }
  };
}
