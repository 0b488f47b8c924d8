/**
 * The one source of truth for every rendered deployment: what runs (hub, N workers), with which image,
 * model, ports, token and memory. Podman and k3s renderers only translate this into their formats.
 */
import path from 'node:path';
import type { Plan } from '../plan/index.js';
import { SwarmError } from '../../protocol/errors.js';
import { packageVersion } from './version.js';
import { hubMem } from './hub-mem.js';
// retention.ts directly, not hub/index.js: rendering needs the horizon's parts, not the hub.
import { retainString, type RetainOptions } from '../../hub/retention.js';
import { archiveMaxString, type ArchiveBound } from '../../hub/archive-bound.js';
import { stateVolume } from './state-volume.js';

/** Inputs of `swarm deploy render`. */
export interface DeployOptions {
  target: 'podman' | 'k3s';
  agents: number;
  /** Model path on the host; its directory is mounted read-only at /models in every container. */
  model: string;
  image?: string;
  driver?: string;
  /** Extra `--driver-opt key=value` for workers. */
  driverOpts?: Record<string, string>;
  /**
   * How the llama.cpp driver (`embedded`, the default) runs, as in `swarm up`. `batched` (the default):
   * the agents of a pod are one worker process with one node-llama-cpp engine and a sequence each
   * (docs/deploy.md says why one container); `per-worker`: a container per agent, an engine each.
   * Other drivers (echo, exec, llama-server, …) keep a container per agent either way.
   */
  engine?: 'batched' | 'per-worker';
  /** k3s with the batched engine: agents in each worker pod, one engine per pod (default: all of them in one pod). */
  perPod?: number;
  /** k3s workers as a Deployment (default, N replicas) or a DaemonSet (one worker pod per node). */
  workers?: 'deployment' | 'daemonset';
  /** podman: run both pods in the host's network namespace bound to 127.0.0.1 (single host, no bridge). */
  hostNetwork?: boolean;
  /** podman + hostNetwork: ports on the host loopback. */
  hubPort?: number;
  controlPort?: number;
  namespace?: string;
  /** podman: host directory for the hub's journal. */
  stateDir?: string;
  /** k3s: size of the hub journal's PersistentVolumeClaim (default 1Gi) and its storage class (default: the cluster's, local-path on k3s). */
  stateSize?: string;
  storageClass?: string;
  /** Capacity plan for this model (per-agent memory -> requests/limits). */
  plan?: Plan;
  /**
   * Workers run with `--failover` (the default; false turns it off): each opens a peer port and the run
   * goes on by gossip if the hub dies: the feature a deployment across machines is for.
   * podman: the workers share one pod's network namespace, so peers dial each other on 127.0.0.1 at
   * `peerPort + i`; k3s: each worker pod binds `peerPort` on its pod IP (advertised from the downward API).
   */
  failover?: boolean;
  /** First peer port (default 7100). */
  peerPort?: number;
  /** podman + failover: host directory for the workers' state (status files, one subfolder per worker; owned by uid 10001). */
  workerStateDir?: string;
  /** podman: pod names are `<name>-hub` and `<name>-workers` (default `swarm`): two deployments on one host. */
  name?: string;
  /** podman across machines: the hub's host first, then the worker hosts; one YAML (one pod) per host. */
  hosts?: { name: string; addr: string }[];
  /**
   * podman: the folder of `swarm certs` output on every host, mounted read-only at /certs: the token
   * (`token`, read through SWARM_TOKEN_FILE: never in the YAML, the environment or a command line)
   * and, across machines, ca.crt and each host's NAME.crt/NAME.key. Default /etc/swarm/certs.
   */
  certsDir?: string;
  /** k3s: the model from this OCI image as an image volume (Kubernetes >= 1.31, ImageVolume) instead of the `swarm-models` claim. */
  modelImage?: string;
  /** k3s: size of the rendered read-only model claim (default 10Gi). */
  modelSize?: string;
  /** The hub's `--retain` (default: the hub's own): its memory request and limit follow it (hub-mem.ts). */
  retain?: RetainOptions;
  /** The hub's `--archive-max` (k3s default: what the state volume leaves after the journal; state-volume.ts). */
  archiveMax?: ArchiveBound;
}

/** Resolved deployment facts shared by all renderers. */
export interface DeploySpec {
  agents: number;
  image: string;
  namespace: string;
  modelHostDir: string;
  modelFile: string;
  /** Path of the model inside containers. */
  modelPath: string;
  /** The workers' driver: `batched` when the batched engine applies. */
  driver: string;
  driverOpts: Record<string, string>;
  /** The batched engine: the agents of a pod share one worker process and its one engine. */
  batched: boolean;
  /** Agents in one worker pod (k3s) with the batched engine; 1 otherwise. */
  perPod: number;
  /** k3s Deployment replicas: agents / perPod. */
  workerPods: number;
  hubName: string;
  /** podman: name of the workers' pod. */
  workersName: string;
  hubPort: number;
  controlPort: number;
  stateHostDir: string;
  stateSize: string;
  storageClass?: string;
  hostNetwork: boolean;
  workersKind: 'deployment' | 'daemonset';
  failover: boolean;
  peerPort: number;
  workerStateHostDir: string;
  /** Memory per worker container in MiB: request = planned need, limit = need + headroom (per-worker; see workerMem). */
  workerMemMi: { request: number; limit: number };
  /** The batched engine's container besides its agents, in MiB: the model's pages, the engine, one worker process. */
  batchedFixedMi: number;
  /** The hub's memory in MiB, from its retention horizon (hub-mem.ts): request = steady state, limit = that + headroom. */
  hubMemMi: { request: number; limit: number; oldSpace: number };
  /** The hub's `--retain`, when given to the render (else the hub's default, which hubMemMi assumes). */
  retain?: RetainOptions;
  /** The hub's `--archive-max`: given, or (k3s) sized to the state volume. */
  archiveMax?: ArchiveBound;
  /** CPU request per worker in millicores: the host's vCPUs divided among the agents (no CPU limit: throttling hurts latency). */
  workerCpuM: number;
  planNote: string;
  /** podman: host folder of `swarm certs` output (the token file, certificates). */
  certsDir: string;
  modelImage?: string;
  modelSize: string;
}

/** Where every container finds the token (a mounted Secret, or the `swarm certs` folder): SWARM_TOKEN_FILE. */
export const TOKEN_FILE = '/certs/token';
/** The containers' environment: the token's file, never the token. */
export const TOKEN_ENV = { name: 'SWARM_TOKEN_FILE', value: TOKEN_FILE };
const MiB = 1024 ** 2;

/** Resolve options into a DeploySpec (pure). Throws SWARM_ERR_CONFIG for agents that do not divide into pods. */
export function deploySpec(o: DeployOptions): DeploySpec {
  const perAgent = o.plan ? o.plan.memory.perAgent.total : 512 * MiB;
  const request = Math.ceil(perAgent / MiB);
  const cpus = o.plan?.options.cpus ?? 4;
  const driver = o.driver ?? 'embedded';
  const batched = driver === 'batched' || ((o.engine ?? 'batched') === 'batched' && driver === 'embedded');
  const perPod = batched && o.target === 'k3s' ? o.perPod ?? o.agents : 1;
  if (perPod < 1 || (o.workers !== 'daemonset' && o.agents % perPod !== 0)) {
    throw new SwarmError('SWARM_ERR_CONFIG', `--per-pod ${perPod} does not divide --agents ${o.agents}: every worker pod of a Deployment runs the same number of agents`);
  }
  const vol = stateVolume(o.target, o.stateSize, o.archiveMax, o.retain);
  return {
    agents: o.agents,
    image: o.image ?? `localhost/swarm:${packageVersion()}`,
    namespace: o.namespace ?? 'swarm',
    modelHostDir: path.posix.dirname(o.model),
    modelFile: path.posix.basename(o.model),
    modelPath: `/models/${path.posix.basename(o.model)}`,
    driver: batched ? 'batched' : driver,
    driverOpts: o.driverOpts ?? {},
    batched,
    perPod,
    workerPods: batched && o.target === 'k3s' ? o.agents / perPod : o.agents,
    hubName: `${o.name ?? 'swarm'}-hub`,
    workersName: `${o.name ?? 'swarm'}-workers`,
    hubPort: o.hubPort ?? 7070,
    controlPort: o.controlPort ?? 7071,
    stateHostDir: o.stateDir ?? '/var/lib/swarm/hub',
    stateSize: vol.stateSize,
    ...(vol.archiveMax ? { archiveMax: vol.archiveMax } : {}),
    ...(o.storageClass ? { storageClass: o.storageClass } : {}),
    hostNetwork: o.hostNetwork ?? false,
    workersKind: o.workers ?? 'deployment',
    failover: o.failover ?? true,
    peerPort: o.peerPort ?? 7100,
    workerStateHostDir: o.workerStateDir ?? '/var/lib/swarm/workers',
    certsDir: o.certsDir ?? '/etc/swarm/certs',
    ...(o.modelImage ? { modelImage: o.modelImage } : {}),
    modelSize: o.modelSize ?? '10Gi',
    // headroom: 25% for allocator slack and prompt spikes; page cache of the model is not in it (see plan's cgroup warning)
    workerMemMi: { request, limit: Math.ceil(request * 1.25) },
    batchedFixedMi: Math.ceil(batchedFixed(o.plan) / MiB),
    hubMemMi: hubMem(o.retain),
    ...(o.retain ? { retain: o.retain } : {}),
    workerCpuM: Math.max(50, Math.floor((cpus * 1000) / Math.max(1, o.agents))),
    planNote: o.plan
      ? `plan: ${o.agents} agents, ${o.plan.options.engine} engine, ctx ${o.plan.options.ctx}, ${request} MiB per agent, at most ${o.plan.maxAgents} fit in ${Math.round(o.plan.options.ramBytes / 1024 ** 3)} GiB`
      : 'plan: model not readable here; 512 MiB per agent assumed (run `swarm plan`)',
  };
}

/**
 * What a batched engine's container holds besides its agents: the model's pages (one process maps
 * them, so its cgroup is charged for all of them), the weights it repacks, the engine's own process
 * and compute buffer, and one worker process. Without a plan: nothing beyond 512 MiB per agent.
 */
function batchedFixed(p: Plan | undefined): number {
  if (!p) return 0;
  const f = p.memory.fixed;
  return f.sharedWeights + f.privateWeights + f.engine + f.compute + f.workerProcesses / Math.max(1, p.workerProcesses);
}

/** Memory of a worker container running `count` agents: request = planned need, limit = need + 25%. */
export function workerMem(s: DeploySpec, count: number): { request: number; limit: number } {
  if (!s.batched) return s.workerMemMi;
  const request = s.batchedFixedMi + s.workerMemMi.request * count;
  return { request, limit: Math.ceil(request * 1.25) };
}

/**
 * The hub container's environment: the token's file, and V8's old space inside the container's memory
 * limit, leaving the rest of the hub its measured room (hub/heap-limit.ts): whatever node would pick
 * (from the cgroup's limit, or the machine's memory where the limit came after the start).
 */
export function hubEnv(s: DeploySpec): { name: string; value: string }[] {
  return [TOKEN_ENV, { name: 'NODE_OPTIONS', value: `--max-old-space-size=${s.hubMemMi.oldSpace}` }];
}

/** Arguments of the hub container (after the image's `swarm` entrypoint). */
export function hubArgs(s: DeploySpec): string[] {
  return ['hub', '--host', s.hostNetwork ? '127.0.0.1' : '0.0.0.0', '--port', String(s.hubPort),
    '--control-port', String(s.controlPort), '--state-dir', '/var/lib/swarm', ...(s.retain ? ['--retain', retainString(s.retain)] : []),
    ...(s.archiveMax ? ['--archive-max', archiveMaxString(s.archiveMax)] : [])];
}

/** Where a worker's peer port listens and what its peers dial. */
export type PeerBinding =
  /** podman: workers share one network namespace (the pod's, or the host's): loopback, one port each. */
  | { kind: 'loopback'; port: number }
  /** k3s: one worker per pod, bound on all addresses, advertised at the pod IP (env POD_IP). */
  | { kind: 'pod-ip'; port: number };

/**
 * Arguments of a worker container; `id` is given where hostnames repeat (containers of one podman pod).
 * With failover, `peer` says where the peer port goes (`count` ports from it) and `stateDir` is a
 * writable folder for the failover status file (the root filesystem is read-only). With the batched
 * engine the container runs `count` agents in one process, a sequence each of the one engine it
 * starts, whose socket and files go in `stateDir` too.
 */
export function workerArgs(s: DeploySpec, id?: string, peer?: PeerBinding, stateDir?: string, count = 1): string[] {
  const hub = s.hostNetwork ? `127.0.0.1:${s.hubPort}` : `${s.hubName}:${s.hubPort}`;
  const args = ['worker', '--hub', hub, '--driver', s.driver, '--model', s.modelPath];
  const opts = s.batched ? { sequences: String(count), ...s.driverOpts } : s.driverOpts;
  for (const [k, v] of Object.entries(opts)) args.push('--driver-opt', `${k}=${v}`);
  if (id) args.push('--id', id);
  if (count > 1) args.push('--count', String(count));
  if (s.failover && peer) {
    args.push('--failover');
    if (peer.kind === 'loopback') args.push('--peer-port', String(peer.port));
    // $(POD_IP) is expanded by Kubernetes from the container's env; off loopback the token guards the port
    else {
      const advertise = Array.from({ length: count }, (_, i) => `$(POD_IP):${peer.port + i}`).join(',');
      args.push('--peer-host', '0.0.0.0', '--peer-port', String(peer.port), '--peer-advertise', advertise);
    }
  }
  if (stateDir && (s.failover || s.batched)) args.push('--state-dir', stateDir);
  return args;
}
