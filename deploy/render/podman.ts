/**
 * Podman: kube YAML for `podman kube play`, and systemd units (quadlet for Podman >= 4.4, a plain
 * unit for older Podman such as Debian 12's 4.3).
 * Podman ignores Services, so the hub is a Pod with a stable name (`swarm-hub`) that workers reach
 * by name on a Podman network with DNS; or, with hostNetwork, at 127.0.0.1 on a single host.
 * Podman runs a Deployment with one replica only, so the workers are one Pod: of one container with
 * the batched engine (N agents in one process, one engine), or of N containers, an engine each.
 * With failover the workers' peer ports are on loopback, one port each: the containers of a pod share
 * its network namespace (or all share the host's with hostNetwork), so no peer port leaves the pod.
 * The token is the file `token` of the `swarm certs` folder, mounted read-only at /certs (never in
 * the YAML, the environment or argv); `podman kube play` drops the image's HEALTHCHECK, so every
 * container gets a liveness probe (deploy/healthcheck.mjs, as a command: see probes.ts).
 */
import type { DeploySpec } from './spec.js';
import { TOKEN_ENV, hubArgs, hubEnv, workerArgs, workerMem } from './spec.js';
import { podmanExec } from './probes.js';

type Obj = Record<string, unknown>;

const security = {
  seccompProfile: { type: 'RuntimeDefault' },
  runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] },
};

/** The two Pods for `podman kube play`. */
export function podmanObjects(s: DeploySpec): Obj[] {
  const env = [TOKEN_ENV];
  const certs = { name: 'certs', hostPath: { path: s.certsDir, type: 'Directory' } };
  const certsMount = { name: 'certs', mountPath: '/certs', readOnly: true };
  const labels = (c: string) => ({ 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': c });
  const net = s.hostNetwork ? { hostNetwork: true } : {};
  const hub: Obj = {
    apiVersion: 'v1', kind: 'Pod', metadata: { name: s.hubName, labels: labels('hub') },
    spec: {
      ...net,
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30, shareProcessNamespace: true,
      containers: [{
        name: 'hub', image: s.image, args: hubArgs(s), env: hubEnv(s),
        ...(s.hostNetwork ? {} : { ports: [{ containerPort: s.hubPort }] }),
        resources: { limits: { memory: `${s.hubMemMi.limit}Mi` } },
        livenessProbe: podmanExec('hub', '/var/lib/swarm'),
        securityContext: security,
        volumeMounts: [{ name: 'state', mountPath: '/var/lib/swarm' }, certsMount],
      }],
      volumes: [{ name: 'state', hostPath: { path: s.stateHostDir, type: 'Directory' } }, certs],
    },
  };
  // With failover: every worker keeps its status file in its own folder of one writable volume (each
  // container's node is PID 1, so the files, named by pid, must not share a folder).
  // The batched engine: one container, its agents in one process (worker-1 … worker-N) and the engine
  // that process starts beside it, its socket in the writable state folder (docs/deploy.md).
  const writable = s.failover || s.batched;
  const container = (name: string, count: number, port: number) => ({
    name, image: s.image,
    args: workerArgs(s, name, { kind: 'loopback', port }, `/var/lib/swarm/${name}`, count), env,
    resources: { limits: { memory: `${workerMem(s, count).limit}Mi` } },
    livenessProbe: podmanExec('worker', `/var/lib/swarm/${name}`),
    securityContext: security,
    volumeMounts: [{ name: 'models', mountPath: '/models', readOnly: true }, certsMount,
      ...(writable ? [{ name: 'worker-state', mountPath: '/var/lib/swarm' }] : [])],
  });
  const containers = s.batched ? [container('worker', s.agents, s.peerPort)]
    : Array.from({ length: s.agents }, (_, i) => container(`worker-${i + 1}`, 1, s.peerPort + i));
  // a host folder, as for the hub: Podman 4.3 makes an emptyDir a root-owned volume the image's uid cannot write
  const stateVolume = { name: 'worker-state', hostPath: { path: s.workerStateHostDir, type: 'Directory' } };
  const workers: Obj = {
    apiVersion: 'v1', kind: 'Pod', metadata: { name: s.workersName, labels: labels('worker') },
    spec: {
      ...net,
      restartPolicy: 'Always',
      // The pod's pause process is PID 1 and reaps what engines and commands orphan: node as PID 1 never
      // reaps a process it did not start, so in a long-running worker they piled up as zombies.
      terminationGracePeriodSeconds: 30, shareProcessNamespace: true,
      containers,
      volumes: [{ name: 'models', hostPath: { path: s.modelHostDir, type: 'Directory' } }, certs, ...(writable ? [stateVolume] : [])],
    },
  };
  return [hub, workers];
}

/** Quadlet units (Podman >= 4.4): a network with DNS and the kube unit. Put them in /etc/containers/systemd/. */
export function quadletUnits(s: DeploySpec, yamlName: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!s.hostNetwork) {
    out['swarm.network'] = [
      '# Podman network with DNS: workers find the hub by its pod name. Internal: no traffic leaves the host.',
      '[Network]', 'NetworkName=swarm', 'Internal=true', '',
    ].join('\n');
  }
  out['swarm.kube'] = [
    '# systemd unit generated by quadlet: hub and workers from the kube YAML.',
    '[Unit]', 'Description=swarm hub and workers', 'Wants=network-online.target', 'After=network-online.target', '',
    '[Kube]', `Yaml=/etc/containers/systemd/${yamlName}`, ...(s.hostNetwork ? [] : ['Network=swarm.network']), '',
    '[Service]', '# workers and the hub stop on SIGTERM within 30 s', 'TimeoutStopSec=60', '',
    '[Install]', 'WantedBy=multi-user.target default.target', '',
  ].join('\n');
  return out;
}

/** A plain systemd unit for Podman < 4.4 (no quadlet): kube play on start, kube down on stop. */
export function systemdUnit(s: DeploySpec, yamlName: string): string {
  const net = s.hostNetwork ? '' : ' --network swarm';
  return [
    '# /etc/systemd/system/swarm.service (Podman < 4.4, e.g. Debian 12). Create the network once:',
    '#   podman network create --internal swarm',
    '[Unit]', 'Description=swarm hub and workers (podman kube play)', 'Wants=network-online.target', 'After=network-online.target', '',
    '[Service]', 'Type=oneshot', 'RemainAfterExit=yes',
    `ExecStart=/usr/bin/podman kube play --replace${net} /etc/swarm/${yamlName}`,
    `ExecStop=/usr/bin/podman kube down /etc/swarm/${yamlName}`,
    'TimeoutStopSec=60', '',
    '[Install]', 'WantedBy=multi-user.target', '',
  ].join('\n');
}
