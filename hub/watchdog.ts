import { every } from '../protocol/index.js';

/** Periodic liveness check. The clock and timer are injectable so tests drive time. */
export interface WatchdogOptions {
  intervalMs: number;
  onTick(now: number): void;
  clock?: () => number;
  setInterval?: (fn: () => void, ms: number) => { unref?(): void } & object;
  clearInterval?: (t: unknown) => void;
}

export class Watchdog {
  private timer?: { unref?(): void } & object;
  constructor(private readonly opts: WatchdogOptions) {}

  start(): void {
    if (this.timer) return;
    // By default on the process's clock, with the store's and the supervisor's ticks: one wake-up.
    const si = this.opts.setInterval ?? ((fn, ms) => ({ stop: every(ms, fn) }));
    const clock = this.opts.clock ?? Date.now;
    this.timer = si(() => this.opts.onTick(clock()), this.opts.intervalMs);
    this.timer.unref?.();
  }

  stop(): void {
    if (!this.timer) return;
    (this.opts.clearInterval ?? ((t) => (t as { stop(): void }).stop()))(this.timer);
    this.timer = undefined;
  }
}
