#!/bin/sh
# Runs a command in a cgroup with a CPU quota, nested one level below a cgroup without one: what a
# process sees under `systemd-run -p CPUQuota=`, a systemd service's CPUQuota= or podman
# --cgroupns=host (the root's quota says none; drivers/batched/cgroup-cpu.ts reads the own cgroup's).
# cgroup v1 (cpu, and cpuacct mirrored where it is mounted apart), as root. The cgroups are removed
# when the command ends, whatever way it ends (what is left in them is moved to the root first).
#   sh bench/in-cgroup.sh CPUS command [args...]     e.g. sh bench/in-cgroup.sh 1 node dist/bench/engine-threads.js
set -eu
cpus=$1; shift
cpu=/sys/fs/cgroup/cpu acct=/sys/fs/cgroup/cpuacct
[ -w "$cpu/cgroup.procs" ] || { echo "in-cgroup: $cpu is not a writable cgroup v1 cpu hierarchy" >&2; exit 2; }
name=swarm-bench-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
dirs="" child=""
cleanup() {
  [ -z "$child" ] || kill "$child" 2>/dev/null || true
  for d in $dirs; do
    for c in "$d/inner" "$d"; do
      for i in 1 2 3 4 5 6 7 8 9 10; do
        for pid in $(cat "$c/cgroup.procs" 2>/dev/null); do echo "$pid" > "${d%/*}/cgroup.procs" 2>/dev/null || true; done
        rmdir "$c" 2>/dev/null && break || sleep 0.2
      done
    done
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for h in $cpu $acct; do
  [ -w "$h/cgroup.procs" ] || continue
  mkdir "$h/$name" "$h/$name/inner"
  dirs="$h/$name $dirs"
done
echo 100000 > "$cpu/$name/inner/cpu.cfs_period_us"
awk -v c="$cpus" 'BEGIN { printf "%d\n", c * 100000 }' > "$cpu/$name/inner/cpu.cfs_quota_us"
echo "in-cgroup: $cpu/$name/inner, quota $(cat "$cpu/$name/inner/cpu.cfs_quota_us")/100000" >&2
# The command runs in a child that joins the cgroups and then execs it; this shell stays outside to clean up.
CG_DIRS=$dirs sh -c 'for d in $CG_DIRS; do echo $$ > "$d/inner/cgroup.procs"; done; unset CG_DIRS; exec "$@"' sh "$@" &
child=$!
set +e
wait "$child"
rc=$?
child=""
exit $rc
