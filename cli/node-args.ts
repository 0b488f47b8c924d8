/**
 * Extra Node flags for the processes a command starts (the hub, its workers, worker pools), from
 * `SWARM_NODE_ARGS`, split on whitespace (no quoting). NODE_OPTIONS refuses most V8 and profiling
 * flags; this takes any, e.g. `SWARM_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" swarm up` writes
 * one CPU profile per process when `swarm down` stops them.
 */
export function nodeArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.SWARM_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
}
