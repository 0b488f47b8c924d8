import os from 'node:os';
import { InvalidArgumentError } from 'commander';

/** `--procs`: how many processes the supervised agents run in; `auto` decides by driver (workerProcesses). */
export type Procs = number | 'auto';

/** `--procs`'s help, for `swarm up` and `swarm hub --supervise`. */
export const PROCS_HELP = 'worker processes: auto = agents that hold no model in their worker (the batched engine\'s, echo, exec, ollama) share one per core less one, and per-worker engines, llama-server and llama-cli get one each; N = N processes (a process\'s agents share its crashes)';

export function parseProcs(v: string): Procs {
  if (v === 'auto') return 'auto';
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`--procs must be auto or an integer >= 1, got "${v}"`);
  return n;
}

/**
 * Drivers whose agents hold no model in the worker process: each agent is a thin client (of the
 * batched engine's process, of Ollama, of a command it runs per task, or of nothing). For these a
 * process per agent buys no isolation worth its price: on 2 cores, 25 echo agents in one process ran
 * a 5,000-task batch at a median 4,250 tasks/s against 3,185 in 25 processes (13 rounds of
 * `node dist/bench/submit.js --procs auto,25`), the machine busy 0.5-1.3 CPU-s less, and each
 * process costs ~16 MB PSS. The embedded and per-worker engines hold a model, and a shared llama-server gives each agent
 * its own server slot by argument: one process each.
 */
const THIN = new Set(['echo', 'simulated', 'batched', 'exec', 'ollama']);

/**
 * How many worker processes run `agents` supervised agents. `auto`: one per agent for drivers that
 * hold a model; for thin ones, one per core less one (the hub and its clients want a core), at least
 * one, never more than the agents, and never more than MAX_PER_PROCESS agents in one.
 */
export function workerProcesses(agents: number, driver: string | undefined, procs: Procs = 'auto', cores = os.availableParallelism()): number {
  if (agents <= 0) return 0;
  const least = Math.ceil(agents / MAX_PER_PROCESS);
  if (procs !== 'auto') return Math.min(agents, Math.max(least, procs));
  if (!driver || !THIN.has(driver)) return agents;
  return Math.max(least, Math.min(agents, cores - 1));
}

/**
 * The processes `swarm up` / `swarm hub --supervise` start: a shared llama-server gives each agent its
 * own server slot by argument, so a process each; otherwise workerProcesses. `cores`: of the machine
 * the swarm runs on (`swarm plan` asks for another machine's).
 */
export function supervisedProcesses(agents: number, driver: string | undefined, procs: Procs, sharedEngine: boolean, cores?: number): number {
  return sharedEngine ? agents : workerProcesses(agents, driver, procs, cores);
}

/**
 * Agents in one process at most, whatever `--procs` says: a process's ids (its command line) and
 * credentials (its environment, ~85 bytes an id) must fit the kernel's 128 KiB bound on one argument
 * or variable, else it cannot be started at all (E2BIG).
 */
export const MAX_PER_PROCESS = 1000;

/** Split ids over `n` processes in order, as evenly as possible (the first ones one larger). */
export function groupIds(ids: string[], n: number): string[][] {
  const k = Math.max(1, Math.min(n, ids.length));
  const out: string[][] = [];
  let at = 0;
  for (let g = 0; g < k; g++) {
    const size = Math.floor(ids.length / k) + (g < ids.length % k ? 1 : 0);
    out.push(ids.slice(at, at + size));
    at += size;
  }
  return out;
}
