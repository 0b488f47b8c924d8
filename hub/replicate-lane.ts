import { performance } from 'node:perf_hooks';
import { nextTurn } from './encode-turns.js';

/**
 * What must reach the holders' feeds in order (the flushes of deltas, evictions, run specs), one step
 * after another: a step may take several turns of the event loop (a large flush is built a slice at a
 * time), and the ones after it wait for it. A step that is over when it returns (a small flush) runs
 * at once, in the caller's turn, as it did before there was a lane.
 */
export class Lane {
  private readonly waiting: { step: () => void | Promise<void>; done: () => void }[] = [];
  private busy = false;

  constructor(private readonly onError: (err: unknown) => void) {}

  /** Run `step` once those before it are over; resolves when it is. */
  run(step: () => void | Promise<void>): Promise<void> {
    return new Promise((done) => {
      this.waiting.push({ step, done });
      if (!this.busy) this.next();
    });
  }

  private next(): void {
    while (this.waiting.length) {
      const w = this.waiting.shift()!;
      let r: void | Promise<void>;
      try { r = w.step(); } catch (err) { this.onError(err); w.done(); continue; }
      if (!r) { w.done(); continue; }
      this.busy = true;
      r.catch(this.onError).then(() => { this.busy = false; w.done(); this.next(); });
      return;
    }
  }
}

/**
 * Run `g` to its end, a slice a turn of the loop (it yields often: the time is looked at between two
 * of its yields), then `done` with what it returned, in the turn it ended. A slice lasts `sliceMs`, or
 * `share` of the time the loop was busy since the slice before, if more: at load a turn of the hub
 * lasts 0.3-1 s, and 8 ms of each stretched a 10,000-task flush over 10 s or more, while the results of
 * its tasks piled up behind it for the holders (in a soak they passed a holder's bound 7-12 times).
 * The first slice runs at once: undefined if that was all of it, else a promise of the rest.
 */
export function inSlices<T>(g: Generator<void, T>, sliceMs: number, done: (x: T) => void, share = 0.25, next: () => Promise<void> = nextTurn): void | Promise<void> {
  let active = performance.eventLoopUtilization().active;
  const slice = (ms: number): boolean => {
    const t0 = performance.now();
    for (;;) {
      const n = g.next();
      if (n.done) { done(n.value); return true; }
      if (performance.now() - t0 >= ms) return false;
    }
  };
  if (slice(sliceMs)) return;
  return (async () => {
    for (;;) {
      await next();
      const now = performance.eventLoopUtilization().active;
      const ms = Math.max(sliceMs, (now - active) * share);
      active = now;
      if (slice(ms)) return;
    }
  })();
}
