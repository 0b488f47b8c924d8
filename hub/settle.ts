/**
 * Runs `fire` once a stream of changes has been still for `quietMs`, but never later than `maxMs`
 * after the first change of the stream: workers rejoining a restarted hub arrive one by one, and one
 * sync after they settle costs less than one per arrival, yet a steady trickle must not hold it off.
 */
export class Settle {
  private timer?: NodeJS.Timeout;
  private since = 0;

  constructor(private readonly fire: () => void, private readonly quietMs = 300, private readonly maxMs = 2000) {}

  /** A change: (re)arm the timer. */
  poke(): void {
    const now = Date.now();
    if (!this.timer) this.since = now;
    clearTimeout(this.timer);
    const wait = Math.max(0, Math.min(this.quietMs, this.since + this.maxMs - now));
    this.timer = setTimeout(() => { this.timer = undefined; this.fire(); }, wait);
    this.timer.unref();
  }

  stop(): void { clearTimeout(this.timer); this.timer = undefined; }
}
