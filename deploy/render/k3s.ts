/**
 * k3s (Kubernetes) manifests at the level operators expect of a chart (the NATS and Redis charts):
 * mutual TLS from Secrets made by `swarm certs`, the token from a Secret file (never the YAML, the
 * environment or argv), the hub's journal on a PersistentVolumeClaim, the model from a read-only
 * claim or an image volume, a Service for the worker port and the control API, NetworkPolicies
 * (workers and peers reach the hub and each other only), a PodDisruptionBudget and topology spread
 * for the workers (the replica holders among them), anti-affinity between the hub and the workers,
 * seccomp RuntimeDefault, no service-account token, Prometheus annotations, exec-free probes and a
 * startupProbe. With failover a headless Service names each worker's fixed peer port.
 * The Secrets are not rendered: `kubectl create secret` makes them from `swarm certs` output
 * (docs/deploy.md), so no render, repository or CI log ever holds the token or a key.
 */
import type { DeploySpec } from './spec.js';
import { TOKEN_ENV, hubArgs, hubEnv, workerArgs, workerMem } from './spec.js';
import { HUB_CPU_REQUEST_M, HUB_STARTUP_BUDGET_S, hubHttpGet, startupProbe, tcpProbe } from './probes.js';

type Obj = Record<string, unknown>;

/** The hub journal's claim, the models' claim and the workers' headless peer Service. */
export const STATE_CLAIM = 'swarm-hub-state';
export const MODELS_CLAIM = 'swarm-models';
export const PEERS_SERVICE = 'swarm-peers';

/** The Secrets the render refers to and the operator creates (docs/deploy.md), with their keys. */
export const K3S_SECRETS: Record<string, string[]> = {
  'swarm-token': ['token'],
  'swarm-tls': ['ca.crt', 'hub.crt', 'hub.key', 'worker.crt', 'worker.key'],
};

/** Pods that may call the control API (the CLI in a pod, Prometheus) carry this label. */
export const CONTROL_CLIENT_LABEL = { 'swarm.mittelo.dev/control-client': 'true' };

const containerSecurity = {
  runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] },
};
const podSecurity = { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } };

/** One read-only volume at /certs: the token and the certificates of one role, readable by the pod's group. */
function certsVolume(role: 'hub' | 'worker'): Obj {
  const keys = role === 'hub' ? ['ca.crt', 'hub.crt', 'hub.key'] : ['ca.crt', 'worker.crt', 'worker.key'];
  return {
    name: 'certs',
    projected: {
      defaultMode: 0o440,
      sources: [
        { secret: { name: 'swarm-token', items: [{ key: 'token', path: 'token' }] } },
        { secret: { name: 'swarm-tls', items: keys.map((k) => ({ key: k, path: k })) } },
      ],
    },
  };
}
const certsMount = { name: 'certs', mountPath: '/certs', readOnly: true };

/** The k3s objects in apply order. */
export function k3sObjects(s: DeploySpec): Obj[] {
  const labels = (component: string) => ({ 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': component });
  const version = s.image.includes(':') ? s.image.slice(s.image.lastIndexOf(':') + 1) : 'latest';
  const meta = (name: string, component: string): Obj => ({ name, namespace: s.namespace, labels: { ...labels(component), 'app.kubernetes.io/version': version } });
  const modelVolume = s.modelImage
    ? { name: 'models', image: { reference: s.modelImage, pullPolicy: 'IfNotPresent' } }
    : { name: 'models', persistentVolumeClaim: { claimName: MODELS_CLAIM, readOnly: true } };
  const modelMount = { name: 'models', mountPath: '/models', readOnly: true };
  const tmp = { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } };
  const tmpMount = { name: 'tmp', mountPath: '/tmp' };
  const byHost = 'kubernetes.io/hostname';
  // A node lost takes as little as can be: the hub away from the workers, the workers (and so the
  // replica holders, chosen one per host) spread over nodes and zones.
  const awayFrom = (component: string) => ({ weight: 100, podAffinityTerm: { topologyKey: byHost, labelSelector: { matchLabels: labels(component) } } });
  const spread = (component: string) => [byHost, 'topology.kubernetes.io/zone'].map((topologyKey) => ({
    maxSkew: 1, topologyKey, whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: labels(component) },
  }));

  const hub: Obj = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta(s.hubName, 'hub'),
    spec: {
      replicas: 1,
      // one hub owns the journal: never two at once
      strategy: { type: 'Recreate' },
      selector: { matchLabels: labels('hub') },
      template: {
        metadata: {
          labels: labels('hub'),
          // /metrics needs the token: a scrape job gives it (bearer_token_file) and the CA (docs/deploy.md).
          annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(s.controlPort), 'prometheus.io/path': '/metrics', 'prometheus.io/scheme': 'https' },
        },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30, shareProcessNamespace: true,
          securityContext: podSecurity,
          affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [awayFrom('worker')] } },
          containers: [{
            name: 'hub', image: s.image, imagePullPolicy: 'IfNotPresent',
            args: [...hubArgs(s), '--control-host', '0.0.0.0', '--tls-cert', '/certs/hub.crt', '--tls-key', '/certs/hub.key', '--tls-ca', '/certs/ca.crt'],
            env: hubEnv(s),
            ports: [{ name: 'workers', containerPort: s.hubPort }, { name: 'control', containerPort: s.controlPort }],
            resources: { requests: { cpu: `${HUB_CPU_REQUEST_M}m`, memory: `${s.hubMemMi.request}Mi` }, limits: { memory: `${s.hubMemMi.limit}Mi` } },
            startupProbe: startupProbe(hubHttpGet(s.controlPort, true), HUB_STARTUP_BUDGET_S),
            livenessProbe: { ...hubHttpGet(s.controlPort, true), periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 },
            readinessProbe: { ...tcpProbe('workers'), periodSeconds: 5 },
            securityContext: containerSecurity,
            volumeMounts: [{ name: 'state', mountPath: '/var/lib/swarm' }, certsMount, tmpMount],
          }],
          volumes: [{ name: 'state', persistentVolumeClaim: { claimName: STATE_CLAIM } }, certsVolume('hub'), tmp],
        },
      },
    },
  };
  // Workers dial the worker port by this name; operators and Prometheus reach the control API here
  // (`--hub-url https://swarm-hub.swarm.svc:7071`, or a port-forward to it).
  const service: Obj = {
    apiVersion: 'v1', kind: 'Service', metadata: meta(s.hubName, 'hub'),
    spec: { selector: labels('hub'), ports: [
      { name: 'workers', port: s.hubPort, targetPort: 'workers' },
      { name: 'control', port: s.controlPort, targetPort: 'control' },
    ] },
  };
  // failover: the peer port on the pod IP (from the downward API), the status file on an emptyDir
  const podIp = { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } };
  // The batched engine's socket, pid and log go there too (the image's SWARM_STATE_DIR).
  const writable = s.failover || s.batched;
  const state = { name: 'state', emptyDir: { sizeLimit: s.batched ? '256Mi' : '16Mi' } };
  // A pod's agents (several with the batched engine) each have a peer port, from s.peerPort up.
  const peerPorts = Array.from({ length: s.perPod }, (_, i) => ({ name: i === 0 ? 'peer' : `peer-${i + 1}`, port: s.peerPort + i }));
  const mem = workerMem(s, s.perPod);
  const tlsArgs = ['--tls-ca', '/certs/ca.crt', '--tls-cert', '/certs/worker.crt', '--tls-key', '/certs/worker.key',
    // Peer links encrypted with the same certificate; peers are pod IPs, which no certificate names:
    // the peer token (derived from the swarm token) authenticates them.
    ...(s.failover ? ['--peer-tls-cert', '/certs/worker.crt', '--peer-tls-key', '/certs/worker.key'] : [])];
  // Exec-free: the peer port answers from the worker's event loop. Without failover a worker opens
  // no port; a dead one exits and is restarted, and the hub's liveness catches a silent one.
  const workerProbes = s.failover ? {
    startupProbe: startupProbe(tcpProbe('peer')),
    livenessProbe: { ...tcpProbe('peer'), periodSeconds: 20, timeoutSeconds: 3, failureThreshold: 3 },
    readinessProbe: { ...tcpProbe('peer'), periodSeconds: 10 },
  } : {};
  const podSpec: Obj = {
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    // The pod's pause process is PID 1 and reaps what engines and commands orphan: node as PID 1 never
    // reaps a process it did not start, so in a long-running worker they piled up as zombies.
    terminationGracePeriodSeconds: 30, shareProcessNamespace: true,
    securityContext: podSecurity,
    affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [awayFrom('hub')] } },
    ...(s.workersKind === 'deployment' ? { topologySpreadConstraints: spread('worker') } : {}),
    containers: [{
      name: 'worker', image: s.image, imagePullPolicy: 'IfNotPresent',
      args: [...workerArgs(s, undefined, { kind: 'pod-ip', port: s.peerPort }, undefined, s.perPod), ...tlsArgs],
      env: s.failover ? [TOKEN_ENV, podIp] : [TOKEN_ENV],
      ...(s.failover ? { ports: peerPorts.map((p) => ({ name: p.name, containerPort: p.port })) } : {}),
      resources: {
        requests: { cpu: `${s.workerCpuM * s.perPod}m`, memory: `${mem.request}Mi` },
        limits: { memory: `${mem.limit}Mi` },
      },
      ...workerProbes,
      securityContext: containerSecurity,
      volumeMounts: [modelMount, certsMount, tmpMount, ...(writable ? [{ name: 'state', mountPath: '/var/lib/swarm' }] : [])],
    }],
    volumes: [modelVolume, certsVolume('worker'), tmp, ...(writable ? [state] : [])],
  };
  const workerTemplate = { metadata: { labels: labels('worker') }, spec: podSpec };
  const workers: Obj = s.workersKind === 'daemonset'
    ? { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: meta('swarm-worker', 'worker'),
        spec: { selector: { matchLabels: labels('worker') }, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } }, template: workerTemplate } }
    : { apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta('swarm-worker', 'worker'),
        spec: { replicas: s.workerPods, selector: { matchLabels: labels('worker') }, strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 1 } }, template: workerTemplate } };
  // Restricted Pod Security: the pods above meet it (non-root, no privilege escalation, seccomp).
  const ns: Obj = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: s.namespace, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } };
  const claim: Obj = {
    apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: meta(STATE_CLAIM, 'hub'),
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: s.stateSize } }, ...(s.storageClass ? { storageClassName: s.storageClass } : {}) },
  };
  // Read-only and shared by every worker: bound to a volume that holds the model (docs/deploy.md).
  const models: Obj = {
    apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: meta(MODELS_CLAIM, 'worker'),
    spec: { accessModes: ['ReadOnlyMany'], resources: { requests: { storage: s.modelSize } } },
  };
  // One worker at a time may be drained: the others keep the run and its replicas.
  const pdb: Obj = {
    apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: meta('swarm-worker', 'worker'),
    spec: { maxUnavailable: 1, selector: { matchLabels: labels('worker') } },
  };
  const peers: Obj = {
    apiVersion: 'v1', kind: 'Service', metadata: meta(PEERS_SERVICE, 'worker'),
    // Not-ready pods too: a worker whose hub is gone is exactly the one its peers must still reach.
    spec: { clusterIP: 'None', publishNotReadyAddresses: true, selector: labels('worker'), ports: peerPorts.map((p) => ({ name: p.name, port: p.port, targetPort: p.name })) },
  };
  return [ns, claim, ...(s.modelImage ? [] : [models]), hub, service, workers, pdb, ...(s.failover ? [peers] : []), ...networkPolicies(s, labels)];
}

/**
 * Deny by default; then workers reach the hub's worker port, peers reach each other's peer port,
 * control clients (labelled) reach the control API, and every pod resolves names (DNS).
 */
function networkPolicies(s: DeploySpec, labels: (c: string) => Record<string, string>): Obj[] {
  const meta = (name: string): Obj => ({ name, namespace: s.namespace, labels: { 'app.kubernetes.io/name': 'swarm' } });
  const pods = (c: string) => ({ podSelector: { matchLabels: labels(c) } });
  const tcp = (port: number) => ({ protocol: 'TCP', port });
  // The peer ports of a pod (one per agent of a batched pod): a range.
  const peers = s.perPod > 1 ? { protocol: 'TCP', port: s.peerPort, endPort: s.peerPort + s.perPod - 1 } : tcp(s.peerPort);
  const swarm = { matchLabels: { 'app.kubernetes.io/name': 'swarm' } };
  const dns = { to: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] };
  const policy = (name: string, spec: Obj): Obj => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: meta(name), spec });
  return [
    policy('swarm-default-deny', { podSelector: swarm, policyTypes: ['Ingress', 'Egress'], egress: [dns] }),
    policy('swarm-hub', {
      ...pods('hub'), policyTypes: ['Ingress'],
      ingress: [
        { from: [pods('worker')], ports: [tcp(s.hubPort)] },
        { from: [{ namespaceSelector: {}, podSelector: { matchLabels: CONTROL_CLIENT_LABEL } }], ports: [tcp(s.controlPort)] },
      ],
    }),
    policy('swarm-worker', {
      ...pods('worker'), policyTypes: ['Ingress', 'Egress'],
      ingress: s.failover ? [{ from: [pods('worker')], ports: [peers] }] : [],
      egress: [{ to: [pods('hub')], ports: [tcp(s.hubPort)] }, ...(s.failover ? [{ to: [pods('worker')], ports: [peers] }] : [])],
    }),
  ];
}
