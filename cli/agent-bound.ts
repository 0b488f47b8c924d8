import fs from 'node:fs';
import { SwarmError } from '../protocol/errors.js';
import { DEFAULT_MAX_CONTROL_CONNECTIONS, fitConnCaps, openFilesLimit } from '../hub/conn-caps.js';

/**
 * Local ports an agent takes on this host: its link to the hub, and with failover its peer listener
 * and at least one gossip link. A million echo agents took every ephemeral port: new worker
 * processes and the hub itself then died on `listen EADDRINUSE` for port 0.
 */
const PORTS_PER_AGENT = { failover: 3, star: 1 } as const;

/** 1048576 as 1,048,576: toLocaleString loaded ICU's data first, 13 ms of `swarm up`'s CPU before it starts the hub. */
const grouped = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** How many ephemeral ports this host hands out (Linux), or undefined. */
export function ephemeralPorts(file = '/proc/sys/net/ipv4/ip_local_port_range'): number | undefined {
  try {
    const [lo, hi] = fs.readFileSync(file, 'utf8').trim().split(/\s+/).map(Number);
    return lo! > 0 && hi! >= lo! ? hi! - lo! + 1 : undefined;
  } catch { return undefined; }
}

/** The most agents one host can run with its hub, and the resource that decides it. */
export function agentBound(failover: boolean, host: { files?: number; ports?: number } = { files: openFilesLimit(), ports: ephemeralPorts() }): { max: number; why: string } | undefined {
  const { files, ports } = host;
  // The hub's worker-port cap under this limit (hub/conn-caps.ts): an agent past it is refused at accept.
  const byFiles = files !== undefined ? { max: fitConnCaps({ workers: files, control: DEFAULT_MAX_CONTROL_CONNECTIONS }, files).workers, why: `the hub keeps a connection per agent and may open ${grouped(files)} files (ulimit -n)` } : undefined;
  const per = failover ? PORTS_PER_AGENT.failover : PORTS_PER_AGENT.star;
  const byPorts = ports !== undefined ? { max: Math.floor(ports / per), why: `each agent takes ${per} local port(s)${failover ? ' with failover' : ''} of this host's ${grouped(ports)} (net.ipv4.ip_local_port_range)` } : undefined;
  if (!byFiles) return byPorts;
  if (!byPorts) return byFiles;
  return byFiles.max <= byPorts.max ? byFiles : byPorts;
}

/** The refusal of `--agents` past what the host can hold (SWARM_ERR_CONFIG naming the limit) and that bound, or undefined; --force skips this. */
export function hostRefusal(agents: number, failover: boolean, bound = agentBound(failover)): { max: number; error: SwarmError } | undefined {
  if (!bound || agents <= bound.max) return undefined;
  return { max: bound.max, error: new SwarmError('SWARM_ERR_CONFIG', `--agents ${agents}: this host holds at most ${grouped(bound.max)} agents: ${bound.why}. Raise the limit, or spread the agents over hosts (swarm worker on each); --force starts them anyway`) };
}
