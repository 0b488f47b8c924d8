/**
 * How long a lease lasts when the task names no timeout. Long, because a CPU generation of a couple
 * of thousand tokens takes minutes; a worker that dies gives its leases back sooner than this (the
 * hub's watchdog, SWIM in gossip mode), so the lease is only the backstop for a live worker that
 * lost a task.
 */
export const DEFAULT_LEASE_MS = 10 * 60_000;
/** Slack on top of a task's own timeout, for its result to travel back. */
export const LEASE_GRACE_MS = 30_000;

/** When a lease taken at `now` lapses: at least `leaseMs`, and a task's own timeout plus slack. */
export function leaseUntil(now: number, timeoutMs: unknown, leaseMs = DEFAULT_LEASE_MS): number {
  const own = typeof timeoutMs === 'number' && timeoutMs > 0 ? timeoutMs + LEASE_GRACE_MS : 0;
  return now + Math.max(leaseMs, own);
}

/** Has a lease that lapses at `until` lapsed at `now`? */
export function lapsed(until: number | undefined, now: number): boolean { return (until ?? Infinity) < now; }
