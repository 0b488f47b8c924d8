/**
 * How long a lease lasts when the task names no timeout. Long, because a CPU generation of a couple
 * of thousand tokens takes minutes; a worker that dies gives its leases back sooner than this (the
 * hub's watchdog, SWIM in gossip mode), so the lease is only the backstop for a live worker that
 * lost a task.
 */
export const DEFAULT_LEASE_MS = 10 * 60_000;
/** Slack on top of a task's own timeout, for its result to travel back. */
export const LEASE_GRACE_MS = 30_000;

/**
 * When a lease taken at `now` lapses: a task that names its own timeout is over by then (its worker
 * stops it and reports), so its timeout plus slack; otherwise `leaseMs`. Flooring a short timeout at
 * the default kept a task with a 10 s timeout on a hung member for 10 minutes.
 */
export function leaseUntil(now: number, timeoutMs: unknown, leaseMs = DEFAULT_LEASE_MS): number {
  return now + (typeof timeoutMs === 'number' && timeoutMs > 0 ? timeoutMs + LEASE_GRACE_MS : leaseMs);
}

/** Has a lease that lapses at `until` lapsed at `now`? */
export function lapsed(until: number | undefined, now: number): boolean { return (until ?? Infinity) < now; }

/** A gap between two ticks longer than this is the process stalling (SIGSTOP, swap, a blocked loop). */
export const STALL_GAP_MS = 3000;
/** Leases lost this long after a stall ended are the stall's doing, not the task's. */
export const STALL_AMNESTY_MS = 30_000;

/**
 * Tells a lease lost because this process stalled from one lost because its task or worker failed.
 * A stall (a clock jump between ticks) cuts every link whose heartbeat it delayed and lets every
 * lease lapse at once; those leases go back without using an attempt while the amnesty lasts. The
 * caller ticks it (no timer here) and asks before counting a lost lease.
 */
export class StallClock {
  private last?: number;
  /** When the last stall ended (epoch ms), if any. */
  stalledUntil?: number;
  /** Stalls seen, and the longest gap (ms). */
  stalls = 0;
  longestMs = 0;

  constructor(private readonly gapMs = STALL_GAP_MS, private readonly amnestyMs = STALL_AMNESTY_MS) {}

  /** A tick at `now`; true if a stall ended just now. */
  tick(now: number, expectedMs: number): boolean {
    const prev = this.last;
    this.last = now;
    if (prev === undefined) return false;
    const gap = now - prev - expectedMs;
    if (gap < this.gapMs) return false;
    this.stalls++;
    this.longestMs = Math.max(this.longestMs, gap);
    this.stalledUntil = now;
    return true;
  }

  /** Is a lease lost at `now` forgiven (a stall ended within the amnesty)? */
  forgives(now: number): boolean {
    return this.stalledUntil !== undefined && now - this.stalledUntil <= this.amnestyMs;
  }
}
