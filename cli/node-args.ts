/**
 * Extra Node flags for the processes a command starts (the hub, its workers, worker pools), from
 * `SWARM_NODE_ARGS`, split on whitespace (no quoting). NODE_OPTIONS refuses most V8 and profiling
 * flags; this takes any, e.g. `SWARM_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" swarm up` writes
 * one CPU profile per process when `swarm down` stops them. `SWARM_HUB_NODE_ARGS` adds flags for the
 * hub's process only (after those), e.g. to profile the hub without slowing its workers.
 */
export function nodeArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.SWARM_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
}

/** The hub's flags: `SWARM_NODE_ARGS`, then `SWARM_HUB_NODE_ARGS` (the hub's only). */
export function hubNodeArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  return [...nodeArgs(env), ...(env.SWARM_HUB_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)];
}
