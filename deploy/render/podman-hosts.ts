/**
 * Podman across machines: one kube YAML per host, one pod per host, in the host's network (so the
 * hub and the peer ports are on the host's own address, which the other hosts reach). The first host
 * runs the hub (mutual TLS, the control API over HTTPS on its address); the agents are spread over
 * the other hosts. Certificates from `swarm certs` are mounted read-only at /certs: ca.crt and the
 * host's NAME.crt/NAME.key, and the token (read through SWARM_TOKEN_FILE, never in the YAML or argv).
 */
import type { DeploySpec } from './spec.js';
import { TOKEN_ENV, hubEnv, workerMem } from './spec.js';
import { podmanExec } from './probes.js';

type Obj = Record<string, unknown>;

/** A machine of the deployment: its name (the certificate's file name) and the address others reach it at. */
export interface DeployHost { name: string; addr: string }

/** Parse `hub=10.0.0.1,w1=10.0.0.2,…`; the first is the hub's host. */
export function parseHosts(v: string): DeployHost[] {
  const hosts = v.split(',').map((x) => x.trim()).filter(Boolean).map((x) => {
    const [name, addr] = x.split('=');
    if (!name || !addr || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`--hosts: expected name=address, got "${x}"`);
    return { name, addr };
  });
  if (hosts.length < 2) throw new Error('--hosts: name the hub\'s host and at least one worker host');
  return hosts;
}

const security = {
  seccompProfile: { type: 'RuntimeDefault' },
  runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] },
};

/** Agents per worker host: as even as can be, the first hosts take the remainder. */
export function spread(agents: number, hosts: number): number[] {
  return Array.from({ length: hosts }, (_, i) => Math.floor(agents / hosts) + (i < agents % hosts ? 1 : 0));
}

/** File name -> Pod objects, one file per host. */
export function podmanHostsObjects(s: DeploySpec, hosts: DeployHost[], certsDir: string): Record<string, Obj[]> {
  const [hubHost, ...workerHosts] = hosts as [DeployHost, ...DeployHost[]];
  const env = [TOKEN_ENV];
  const labels = (c: string) => ({ 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': c });
  const certs = { name: 'certs', hostPath: { path: certsDir, type: 'Directory' } };
  const certsMount = { name: 'certs', mountPath: '/certs', readOnly: true };
  const out: Record<string, Obj[]> = {};
  out[`swarm-${hubHost.name}.yaml`] = [{
    apiVersion: 'v1', kind: 'Pod', metadata: { name: s.hubName, labels: labels('hub') },
    spec: {
      hostNetwork: true, restartPolicy: 'Always', terminationGracePeriodSeconds: 30, shareProcessNamespace: true,
      containers: [{
        name: 'hub', image: s.image, env: hubEnv(s),
        args: ['hub', '--host', hubHost.addr, '--port', String(s.hubPort), '--control-host', hubHost.addr, '--control-port', String(s.controlPort),
          '--tls-cert', `/certs/${hubHost.name}.crt`, '--tls-key', `/certs/${hubHost.name}.key`, '--tls-ca', '/certs/ca.crt', '--state-dir', '/var/lib/swarm'],
        resources: { limits: { memory: `${s.hubMemMi.limit}Mi` } },
        // The hub serves its control API over HTTPS on the host address here: hub.json says so.
        livenessProbe: podmanExec('hub', '/var/lib/swarm'),
        securityContext: security,
        volumeMounts: [{ name: 'state', mountPath: '/var/lib/swarm' }, certsMount],
      }],
      volumes: [{ name: 'state', hostPath: { path: s.stateHostDir, type: 'Directory' } }, certs],
    },
  }];
  const counts = spread(s.agents, workerHosts.length);
  const writable = s.failover || s.batched;
  workerHosts.forEach((h, k) => {
    // With the batched engine, one container per host: its agents in one process (NAME-1 … NAME-K)
    // and the one engine that process starts, its socket in the writable state folder.
    const container = (name: string, id: string, count: number, port: number): Obj => {
      const args = ['worker', '--hub', `${hubHost.addr}:${s.hubPort}`, '--tls-ca', '/certs/ca.crt', '--driver', s.driver, '--model', s.modelPath, '--id', id];
      const opts = s.batched ? { sequences: String(count), ...s.driverOpts } : s.driverOpts;
      for (const [key, v] of Object.entries(opts)) args.push('--driver-opt', `${key}=${v}`);
      if (count > 1) args.push('--count', String(count));
      // Peers on the host's address, one port each (the pod is in the host's network); the host's
      // certificate serves the peer port and presents this worker to the hub.
      if (s.failover) args.push('--failover', '--peer-host', h.addr, '--peer-port', String(port), '--state-dir', `/var/lib/swarm/${id}`,
        '--peer-tls-cert', `/certs/${h.name}.crt`, '--peer-tls-key', `/certs/${h.name}.key`, '--peer-tls-ca', '/certs/ca.crt');
      else args.push('--tls-cert', `/certs/${h.name}.crt`, '--tls-key', `/certs/${h.name}.key`, ...(s.batched ? ['--state-dir', `/var/lib/swarm/${id}`] : []));
      return {
        name, image: s.image, args, env,
        resources: { limits: { memory: `${workerMem(s, count).limit}Mi` } },
        livenessProbe: podmanExec('worker', `/var/lib/swarm/${id}`),
        securityContext: security,
        volumeMounts: [{ name: 'models', mountPath: '/models', readOnly: true }, certsMount,
          ...(writable ? [{ name: 'worker-state', mountPath: '/var/lib/swarm' }] : [])],
      };
    };
    const containers = s.batched ? (counts[k]! > 0 ? [container('worker', h.name, counts[k]!, s.peerPort)] : [])
      : Array.from({ length: counts[k]! }, (_, i) => container(`worker-${i + 1}`, `${h.name}-${i + 1}`, 1, s.peerPort + i));
    out[`swarm-${h.name}.yaml`] = [{
      apiVersion: 'v1', kind: 'Pod', metadata: { name: `${s.workersName}-${h.name}`, labels: labels('worker') },
      spec: {
        hostNetwork: true, restartPolicy: 'Always', terminationGracePeriodSeconds: 30, shareProcessNamespace: true, containers,
        volumes: [{ name: 'models', hostPath: { path: s.modelHostDir, type: 'Directory' } }, certs,
          ...(writable ? [{ name: 'worker-state', hostPath: { path: s.workerStateHostDir, type: 'Directory' } }] : [])],
      },
    }];
  });
  return out;
}
