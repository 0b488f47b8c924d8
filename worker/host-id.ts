import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';

let cached: string | undefined;

function read(file: string, link = false): string {
  try { return (link ? fs.readlinkSync(file) : fs.readFileSync(file, 'utf8')).trim(); } catch { return ''; }
}

/**
 * What this worker process reports as its host in HANDSHAKE (`host_id`): the failure domain the hub
 * spreads replica holders over. `SWARM_HOST_ID` (`swarm worker --host-id`) names it outright;
 * otherwise it is the hostname with a digest of the machine id, the boot id and this process's pid
 * and network namespaces. Pids say nothing across containers (every container's worker is PID 1),
 * and a container, a pod or a namespace host of the test bed shares the machine and boot ids with
 * its neighbours but not its namespaces.
 */
export function hostId(): string {
  const named = process.env.SWARM_HOST_ID?.trim();
  if (named) return named.slice(0, 256);
  cached ??= `${os.hostname().slice(0, 200)}/${createHash('sha256').update([
    read('/etc/machine-id'), read('/proc/sys/kernel/random/boot_id'),
    read('/proc/self/ns/pid', true), read('/proc/self/ns/net', true),
  ].join('\n')).digest('hex').slice(0, 16)}`;
  return cached;
}
