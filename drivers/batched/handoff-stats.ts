/**
 * Where a sequence's time goes between its chats, as the engine sees it: the idle gap from a chat's
 * end to the next chat's start on the same connection (the worker's and the hub's share: the result's
 * way out and the next lease's way in; none for a chat sent ahead, which starts as the one before it
 * ends), and from a chat's start to its first token (the engine's share: admission into the next step
 * and the prompt). Logged at exit, read by the benches.
 */
export class HandoffStats {
  chats = 0;
  private readonly idle = new Ring();
  private readonly first = new Ring();
  private idleSum = 0;
  private firstSum = 0;
  private idleN = 0;
  private firstN = 0;
  /** Chats that arrived while the one before them ran (sent ahead), and their idle time. */
  private aheadN = 0;
  private aheadIdleSum = 0;

  /**
   * A chat started `gapMs` after the connection's previous chat ended (undefined: its first chat);
   * `ahead`: it had arrived while that one ran (sent ahead: Driver.chatAhead).
   */
  arrived(gapMs: number | undefined, ahead = false): void {
    this.chats++;
    if (gapMs === undefined) return;
    if (ahead) { this.aheadN++; this.aheadIdleSum += gapMs; }
    this.idleSum += gapMs;
    this.idleN++;
    this.idle.add(gapMs);
  }

  /** A chat's first token came `ms` after it arrived. */
  firstToken(ms: number): void {
    this.firstSum += ms;
    this.firstN++;
    this.first.add(ms);
  }

  /** One line for the log: counts, means and quantiles of the latest samples. */
  line(): string {
    const q = (r: Ring, p: number): string => {
      if (!r.xs.length) return '-';
      const s = [...r.xs].sort((a, b) => a - b);
      return s[Math.min(s.length - 1, Math.floor(p * s.length))]!.toFixed(2);
    };
    const mean = (sum: number, n: number): string => (n ? (sum / n).toFixed(2) : '-');
    return `${this.chats} chats; idle between a sequence's chats ms: mean ${mean(this.idleSum, this.idleN)}, p50 ${q(this.idle, 0.5)}, p90 ${q(this.idle, 0.9)} (${this.idleN}); arrival to first token ms: mean ${mean(this.firstSum, this.firstN)}, p50 ${q(this.first, 0.5)}, p90 ${q(this.first, 0.9)} (${this.firstN}); sent ahead: ${this.aheadN} chats, idle mean ${mean(this.aheadIdleSum, this.aheadN)}`;
  }
}

/** The latest samples, for the quantiles: this many at most, however long the engine runs. */
class Ring {
  readonly xs: number[] = [];
  private at = 0;
  add(x: number): void {
    if (this.xs.length < KEEP) { this.xs.push(x); return; }
    this.xs[this.at] = x;
    this.at = (this.at + 1) % KEEP;
  }
}

const KEEP = 4096;
