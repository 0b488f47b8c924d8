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
 * Run `g` to its end, a slice of about `sliceMs` a turn of the loop (it yields often: the time is
 * looked at between two of its yields), then `done` with what it returned, in the turn it ended. The
 * first slice runs at once: undefined if that was all of it, else a promise of the rest.
 */
export function inSlices<T>(g: Generator<void, T>, sliceMs: number, done: (x: T) => void, next: () => Promise<void> = nextTurn): void | Promise<void> {
  const slice = (): boolean => {
    const t0 = performance.now();
    for (;;) {
      const n = g.next();
      if (n.done) { done(n.value); return true; }
      if (performance.now() - t0 >= sliceMs) return false;
    }
  };
  if (slice()) return;
  return (async () => { do await next(); while (!slice()); })();
}
