#!/bin/sh
# Make a minimal Node base image without a registry: the host's node binary (stripped) and the
# shared libraries it and the llama.cpp addon load, imported with `podman import`.
#   deploy/container/make-base-image.sh [IMAGE_NAME]      (default localhost/swarm-node-base:20)
# Needs: podman, node, ldd, strip (binutils) on the host. Prints the image name.
set -eu
IMAGE=${1:-localhost/swarm-node-base:20}
NODE=$(command -v node)
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT/usr/local/bin" "$ROOT/tmp" "$ROOT/etc" "$ROOT/var/lib/swarm"
chmod 1777 "$ROOT/tmp"
if command -v strip >/dev/null 2>&1; then strip -o "$ROOT/usr/local/bin/node" "$NODE"; else cp "$NODE" "$ROOT/usr/local/bin/node"; fi
# libraries of node, plus those the llama.cpp addon needs (libstdc++, libgcc_s, libm, libc, libgomp if present)
LIBS=$(ldd "$NODE" | awk '/=>/ {print $3} /^\s*\/lib/ {print $1}')
for extra in libgomp.so.1 libstdc++.so.6 libgcc_s.so.1; do
  p=$(ldconfig -p 2>/dev/null | awk -v l="$extra" '$1 == l && /x86-64|x86_64/ {print $NF; exit}')
  [ -n "$p" ] && LIBS="$LIBS $p"
done
for l in $LIBS; do
  mkdir -p "$ROOT$(dirname "$l")"
  cp -L "$l" "$ROOT$l"
done
# /bin/sh: `podman kube play` runs a pod's probes as `/bin/sh -c "CMD || exit 1"` (the host's dash,
# ~120 KB, needs only libc, copied above); without it every probe fails and the pod reads unhealthy.
SH=$(readlink -f /bin/sh)
mkdir -p "$ROOT/bin" && cp "$SH" "$ROOT/bin/sh"
for l in $(ldd "$SH" | awk '/=>/ {print $3}'); do [ -e "$ROOT$l" ] || { mkdir -p "$ROOT$(dirname "$l")"; cp -L "$l" "$ROOT$l"; }; done
# /lib64 -> usr layout as on Debian, so the interpreter path in the binary resolves
[ -e "$ROOT/lib64/ld-linux-x86-64.so.2" ] || { mkdir -p "$ROOT/lib64"; cp -L /lib64/ld-linux-x86-64.so.2 "$ROOT/lib64/"; }
printf 'root:x:0:0:root:/root:/sbin/nologin\nswarm:x:10001:10001:swarm:/var/lib/swarm:/sbin/nologin\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\nswarm:x:10001:\n' > "$ROOT/etc/group"
printf 'hosts: files dns\n' > "$ROOT/etc/nsswitch.conf"
tar -C "$ROOT" -c . | podman import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'CMD ["node"]' - "$IMAGE" >/dev/null
echo "$IMAGE"
