#!/bin/sh
# What CI needs for test/deploy/podman.test.ts: Podman with runc (crun fails on this kind of host), the
# cgroupfs manager, and default ulimits, as root. Takes about 20-40 s on a Debian 12 host with a
# reachable apt mirror (measured: apt-get install 19.5 s; update adds a few seconds).
set -eu
export DEBIAN_FRONTEND=noninteractive
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq podman runc binutils >/dev/null
fi
mkdir -p /etc/containers
cat > /etc/containers/containers.conf <<'CONF'
# written by deploy/ci-install.sh
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}} {{.Version.Version}}'
