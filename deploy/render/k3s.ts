/**
 * k3s (Kubernetes) manifests: Secret, the hub's journal on a PersistentVolumeClaim (k3s ships the
 * local-path provisioner; a hostPath would tie the hub to one node without saying so), hub Deployment +
 * Service, workers Deployment or DaemonSet, and with failover a headless Service over the workers' peer
 * ports. Peers learn each other's pod IPs from the hub's peer list (every worker registers the address
 * it advertises); the headless Service gives each worker pod a DNS record on the named `peer` port,
 * for NetworkPolicies and for looking at a swarm whose hub is down.
 */
import type { DeploySpec } from './spec.js';
import { hubArgs, workerArgs } from './spec.js';

type Obj = Record<string, unknown>;

/** The hub journal's claim and the workers' headless peer Service. */
export const STATE_CLAIM = 'swarm-hub-state';
export const PEERS_SERVICE = 'swarm-peers';

const security = {
  runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] },
};
const tokenEnv = { name: 'SWARM_TOKEN', valueFrom: { secretKeyRef: { name: 'swarm-token', key: 'token' } } };
const health = (role: string): Obj => ({ exec: { command: ['node', '/app/deploy/healthcheck.mjs', role] } });

/** The k3s objects in apply order. */
export function k3sObjects(s: DeploySpec): Obj[] {
  const labels = (component: string) => ({ 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': component });
  const meta = (name: string, component: string): Obj => ({ name, namespace: s.namespace, labels: labels(component) });
  const modelVolume = { name: 'models', hostPath: { path: s.modelHostDir, type: 'Directory' } };
  const modelMount = { name: 'models', mountPath: '/models', readOnly: true };
  const tmp = { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } };
  const tmpMount = { name: 'tmp', mountPath: '/tmp' };

  const hub: Obj = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta(s.hubName, 'hub'),
    spec: {
      replicas: 1,
      // one hub owns the journal: never two at once
      strategy: { type: 'Recreate' },
      selector: { matchLabels: labels('hub') },
      template: {
        metadata: { labels: labels('hub') },
        spec: {
          terminationGracePeriodSeconds: 30,
          containers: [{
            name: 'hub', image: s.image, imagePullPolicy: 'IfNotPresent', args: hubArgs(s),
            env: [tokenEnv],
            ports: [{ name: 'workers', containerPort: s.hubPort }],
            resources: { requests: { cpu: '100m', memory: `${s.hubMemMi.request}Mi` }, limits: { memory: `${s.hubMemMi.limit}Mi` } },
            // the control API listens on loopback inside the pod, so probes exec into it
            livenessProbe: { ...health('hub'), initialDelaySeconds: 10, periodSeconds: 15, timeoutSeconds: 5 },
            readinessProbe: { tcpSocket: { port: s.hubPort }, periodSeconds: 5 },
            securityContext: security,
            volumeMounts: [{ name: 'state', mountPath: '/var/lib/swarm' }, tmpMount],
          }],
          volumes: [{ name: 'state', persistentVolumeClaim: { claimName: STATE_CLAIM } }, tmp],
          securityContext: { fsGroup: 10001 },
        },
      },
    },
  };
  const service: Obj = {
    apiVersion: 'v1', kind: 'Service', metadata: meta(s.hubName, 'hub'),
    spec: { selector: labels('hub'), ports: [{ name: 'workers', port: s.hubPort, targetPort: s.hubPort }] },
  };
  // failover: the peer port on the pod IP (from the downward API), the status file on an emptyDir
  const podIp = { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } };
  const state = { name: 'state', emptyDir: { sizeLimit: '16Mi' } };
  const podSpec: Obj = {
    terminationGracePeriodSeconds: 30,
    containers: [{
      name: 'worker', image: s.image, imagePullPolicy: 'IfNotPresent',
      args: workerArgs(s, undefined, { kind: 'pod-ip', port: s.peerPort }),
      env: s.failover ? [tokenEnv, podIp] : [tokenEnv],
      ...(s.failover ? { ports: [{ name: 'peer', containerPort: s.peerPort }] } : {}),
      resources: {
        requests: { cpu: `${s.workerCpuM}m`, memory: `${s.workerMemMi.request}Mi` },
        limits: { memory: `${s.workerMemMi.limit}Mi` },
      },
      livenessProbe: { ...health('worker'), initialDelaySeconds: 10, periodSeconds: 30, timeoutSeconds: 5 },
      securityContext: security,
      volumeMounts: [modelMount, tmpMount, ...(s.failover ? [{ name: 'state', mountPath: '/var/lib/swarm' }] : [])],
    }],
    volumes: [modelVolume, tmp, ...(s.failover ? [state] : [])],
  };
  const workers: Obj = s.workersKind === 'daemonset'
    ? { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: meta('swarm-worker', 'worker'),
        spec: { selector: { matchLabels: labels('worker') }, template: { metadata: { labels: labels('worker') }, spec: podSpec } } }
    : { apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta('swarm-worker', 'worker'),
        spec: { replicas: s.agents, selector: { matchLabels: labels('worker') }, template: { metadata: { labels: labels('worker') }, spec: podSpec } } };
  const ns: Obj = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: s.namespace } };
  const secret: Obj = {
    apiVersion: 'v1', kind: 'Secret', metadata: meta('swarm-token', 'hub'), type: 'Opaque', stringData: { token: s.token },
  };
  const claim: Obj = {
    apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: meta(STATE_CLAIM, 'hub'),
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: s.stateSize } }, ...(s.storageClass ? { storageClassName: s.storageClass } : {}) },
  };
  const peers: Obj = {
    apiVersion: 'v1', kind: 'Service', metadata: meta(PEERS_SERVICE, 'worker'),
    // Not-ready pods too: a worker whose hub is gone is exactly the one its peers must still reach.
    spec: { clusterIP: 'None', publishNotReadyAddresses: true, selector: labels('worker'), ports: [{ name: 'peer', port: s.peerPort, targetPort: 'peer' }] },
  };
  return [ns, secret, claim, hub, service, workers, ...(s.failover ? [peers] : [])];
}
