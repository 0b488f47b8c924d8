/**
 * How long before a task ends a worker that says so (cap `ends-soon`) is leased its next one, by
 * default: the hint, the lease and the chat each cross a process, 1-4 ms on a quiet machine and 10-20
 * ms at a load of 10 on 2 cores, and a task leased early only waits in the engine behind the running
 * chat. Its own module: the CLI reads it without loading the config schema (zod).
 */
export const DEFAULT_LEASE_AHEAD_MS = 40;
