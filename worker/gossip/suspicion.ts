import type { Clock, TimerHandle } from './clock.js';

/**
 * Lifeguard's suspicion timer: starts at `max` and shrinks towards `min` as independent members
 * confirm the suspicion (log-scaled, `k` confirmations expected). With few confirmations the
 * suspect keeps a long time to refute, so a node that is only slow is not declared dead.
 */
export class Suspicion {
  private readonly confirmers = new Set<string>();
  private timer?: TimerHandle;
  private readonly start: number;

  constructor(
    private readonly clock: Clock,
    from: string,
    private readonly k: number,
    private readonly minMs: number,
    private readonly maxMs: number,
    private readonly onTimeout: (confirmations: number) => void,
  ) {
    this.start = clock.now();
    this.confirmers.add(from);
    this.schedule();
  }

  /** Count a confirmation from `from`; true if it was new (and so worth re-gossiping). */
  confirm(from: string): boolean {
    if (this.confirmers.size - 1 >= this.k || this.confirmers.has(from)) return false;
    this.confirmers.add(from);
    this.schedule();
    return true;
  }

  cancel(): void { this.clock.clearTimeout(this.timer); this.timer = undefined; }

  /** Total timeout for `n` confirmations (beyond the first suspector). */
  static timeout(n: number, k: number, minMs: number, maxMs: number): number {
    if (k < 1) return minMs;
    const frac = Math.log(n + 1) / Math.log(k + 1);
    return Math.max(minMs, Math.floor(maxMs - frac * (maxMs - minMs)));
  }

  private schedule(): void {
    this.clock.clearTimeout(this.timer);
    const n = this.confirmers.size - 1;
    const remaining = Suspicion.timeout(n, this.k, this.minMs, this.maxMs) - (this.clock.now() - this.start);
    this.timer = this.clock.setTimeout(() => { this.timer = undefined; this.onTimeout(n); }, Math.max(0, remaining));
  }
}
