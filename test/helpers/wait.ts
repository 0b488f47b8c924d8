/**
 * Waiting in tests on the real clock, in one place. Tests on driven time use the sims' `runUntil`
 * (gossip-sim.ts, membership-sim.ts) instead.
 */

/** Resolve after `ms`. For pacing a fixture, never as a stand-in for waiting on a condition. */
export function sleep(ms: number): Promise<void> { return new Promise((r) => setTimeout(r, ms)); }

/** Poll until `cond` holds or `ms` passes; returns whether it held. A bound, not a timing assertion. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 10_000, every = 25): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) { if (await cond()) return true; await sleep(every); }
  return cond();
}
