/**
 * Loaded into the hub's process (`SWARM_HUB_NODE_ARGS="--import <dist>/bench/cgroup-hook.js"`) with
 * `SWARM_BENCH_HUB_CGROUP` set to a cgroup v1 memory group's directory: the process joins the group
 * before the hub starts, so that the group's limit is the hub's (bench/hub-cgroup.ts). A child inherits
 * its parent's group at fork and is charged there for what it touches until it leaves, so the
 * processes the hub starts (its workers) leave for `SWARM_BENCH_HUB_CGROUP_HOME` in a shell before
 * node starts (`exec` keeps the pid the hub tracks): the group holds the hub alone, as a container would.
 * The pid and the RSS it joined with (node's start, charged outside) are appended to
 * `SWARM_BENCH_HUB_CGROUP_LOG`, so a bench can tell which hubs ran limited.
 */
import cp from 'node:child_process';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const dir = process.env.SWARM_BENCH_HUB_CGROUP;
const home = process.env.SWARM_BENCH_HUB_CGROUP_HOME;
if (dir) {
  fs.writeFileSync(`${dir}/cgroup.procs`, String(process.pid));
  const log = process.env.SWARM_BENCH_HUB_CGROUP_LOG;
  if (log) fs.appendFileSync(log, `${process.pid} ${(process.memoryUsage().rss / 2 ** 20).toFixed(1)}\n`);
  if (home) {
    const spawn = cp.spawn;
    const leaving = ((file: string, args?: readonly string[], opts?: cp.SpawnOptions) =>
      Array.isArray(args) && !opts?.shell
        ? spawn('/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', `${home}/cgroup.procs`, file, ...args], opts ?? {})
        : spawn(file, args as string[], opts ?? {})) as typeof cp.spawn;
    cp.spawn = leaving;
    syncBuiltinESMExports();
  }
}
