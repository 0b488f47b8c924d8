/** k3s (Kubernetes) manifests: Secret, hub Deployment + Service, workers Deployment or DaemonSet. */
import type { DeploySpec } from './spec.js';
import { hubArgs, workerArgs } from './spec.js';

type Obj = Record<string, unknown>;

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
          volumes: [{ name: 'state', hostPath: { path: s.stateHostDir, type: 'DirectoryOrCreate' } }, tmp],
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
  return [ns, secret, hub, service, workers];
}
