import os from 'node:os';
import { SwarmError } from '../protocol/index.js';

/**
 * The niceness supervised worker processes run at above the hub's (their engines inherit it):
 * `SWARM_WORKER_NICE` (0-19). Off by default: it puts the hub first among the swarm's own processes
 * (a replay after a restart with every worker still running), but on a machine loaded by others the
 * workers then rejoin a restarted hub later: after kill -9 with 1M tasks of history at load 18-20,
 * the swarm was ready 29-33 s after the kill at +5 against 20-23 s at 0, and the hub listened no
 * sooner (docs/performance.md, "Restart at any age").
 */
export const DEFAULT_WORKER_NICE = 0;

/** The worker niceness `SWARM_WORKER_NICE` asks for (DEFAULT_WORKER_NICE when unset); a value out of 0-19 is a config error. */
export function workerNice(env: NodeJS.ProcessEnv = process.env): number {
  const v = env.SWARM_WORKER_NICE;
  if (v === undefined || v === '') return DEFAULT_WORKER_NICE;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 19) throw new SwarmError('SWARM_ERR_CONFIG', `SWARM_WORKER_NICE must be an integer from 0 to 19, not ${JSON.stringify(v)}`);
  return n;
}

/** Add `by` to process `pid`'s niceness (at most 19); throws where the system does not allow it. */
export function lowerPriority(pid: number, by: number): void {
  os.setPriority(pid, Math.min(19, os.getPriority(pid) + by));
}
