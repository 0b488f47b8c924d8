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
