// swarm deploy render: k3s manifests validate against the Kubernetes schemas (offline, kubernetes-models),
// podman YAML has the shape podman kube play needs, and the checked-in examples match the renderer.
// Regenerate the examples with: SWARM_UPDATE_EXAMPLES=1 npx tap test/deploy/deploy-render.test.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { plan, readModelShape } from '../../deploy/plan/index.js';
import { HUB_STARTUP_BUDGET_S, STARTUP_BUDGET_S, packageVersion, renderDeployment, type DeployOptions } from '../../deploy/render/index.js';
import { llama3_8bShape, writeGguf } from '../helpers/gguf-writer.js';
import { k8sProblems } from '../helpers/k8s-strict.js';
import { ROOT } from '../helpers/paths.js';

const EXAMPLES = path.join(ROOT, 'deploy/examples');
const MODEL = '/mnt/models/llama-3-8b-instruct.Q4_K_M.gguf';

/** Every object of a multi-document YAML, checked against the schemas with unknown fields refused. */
function validateAll(t: Test, text: string): Record<string, unknown>[] {
  const docs = YAML.parseAllDocuments(text).map((d) => d.toJSON() as Record<string, unknown>);
  for (const d of docs) t.same(k8sProblems(d), [], `${String(d.kind)} ${String((d.metadata as { name?: string }).name)} validates, no unknown field`);
  return docs;
}

// The examples' plan: the Llama-3-8B shape, --no-repack and a 64-token micro-batch; per-worker engines
// unless asked for the batched one.
async function examplePlan(t: Test, engine: 'per-worker' | 'batched' = 'per-worker') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-render-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const s = llama3_8bShape();
  const file = path.join(dir, 'm.gguf');
  writeGguf(file, s.meta, s.tensors);
  return plan(await readModelShape(file), { agents: 25, engine, repack: false, ubatch: 64 });
}

t.test('k3s manifests validate against the Kubernetes schemas', async (t) => {
  const p = await examplePlan(t);
  for (const workers of ['deployment', 'daemonset'] as const) {
    const files = renderDeployment({ target: 'k3s', agents: 25, model: MODEL, plan: p, workers, engine: 'per-worker' });
    const docs = validateAll(t, files['swarm-k3s.yaml']!);
    t.same(docs.map((d) => d.kind), ['Namespace', 'PersistentVolumeClaim', 'PersistentVolumeClaim', 'Deployment', 'Service', workers === 'daemonset' ? 'DaemonSet' : 'Deployment',
      'PodDisruptionBudget', 'Service', 'NetworkPolicy', 'NetworkPolicy', 'NetworkPolicy']);
    const w = docs[5] as any;
    const c = w.spec.template.spec.containers[0];
    t.equal(c.resources.requests.memory, `${Math.ceil(p.memory.perAgent.total / 2 ** 20)}Mi`, 'request from the plan');
    t.same(c.volumeMounts.find((m: any) => m.name === 'models'), { name: 'models', mountPath: '/models', readOnly: true });
    t.ok(c.args.includes('swarm-hub:7070'), 'workers find the hub through the Service');
    if (workers === 'deployment') t.equal(w.spec.replicas, 25);
  }
});

t.test('the render check refuses unknown fields and wrong types', async (t) => {
  const docs = YAML.parseAllDocuments(renderDeployment({ target: 'k3s', agents: 2, model: MODEL })['swarm-k3s.yaml']!).map((d) => d.toJSON()) as any[];
  const hub = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-hub');
  const probe = hub.spec.template.spec.containers[0].livenessProbe;
  probe.periodSecond = probe.periodSeconds;
  delete probe.periodSeconds;
  t.match(k8sProblems(hub).join('\n'), /livenessProbe\/periodSecond: unknown field/, 'a periodSecond typo fails');
  t.match(k8sProblems({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' }, spec: { replicas: 'three' } }).join('\n'), /replicas: type/, 'a wrong type fails');
  t.same(k8sProblems({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x', labels: { any: 'label' }, annotations: { 'any/annotation': 'v' } } }), [], 'maps take any key');
});

t.test('k3s at chart level: TLS and token from Secrets, PDB, spread, NetworkPolicy, seccomp, no SA token, model claim, pinned image, control Service, scrape, probes', async (t) => {
  const text = renderDeployment({ target: 'k3s', agents: 5, model: MODEL, engine: 'per-worker' })['swarm-k3s.yaml']!;
  const docs = validateAll(t, text) as any[];
  const get = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name);
  const hub = get('Deployment', 'swarm-hub'), workers = get('Deployment', 'swarm-worker');
  const hp = hub.spec.template.spec, wp = workers.spec.template.spec;
  const hc = hp.containers[0], wc = wp.containers[0];
  const arg = (c: any, k: string) => c.args[c.args.indexOf(k) + 1];

  t.notOk(docs.some((d) => d.kind === 'Secret'), 'no Secret rendered: the token and keys never sit in a render');
  t.notMatch(text, /stringData|SWARM_TOKEN[^_]|BEGIN .*PRIVATE KEY/, 'no token or key material anywhere');
  t.match(text, /kubectl -n swarm create secret generic swarm-token --from-file=token=certs\/token/, 'the header says how to make the Secrets from swarm certs');
  for (const [c, pod, role] of [[hc, hp, 'hub'], [wc, wp, 'worker']] as const) {
    t.same(c.env.filter((e: any) => e.name.startsWith('SWARM_TOKEN')), [{ name: 'SWARM_TOKEN_FILE', value: '/certs/token' }], `${role}: the token from a Secret file`);
    t.notOk(c.args.includes('--token'), `${role}: no token in argv`);
    const certs = pod.volumes.find((v: any) => v.name === 'certs').projected;
    t.same(certs.sources.map((x: any) => x.secret.name), ['swarm-token', 'swarm-tls'], `${role}: certificates from Secrets`);
    t.equal(pod.automountServiceAccountToken, false, `${role}: no service-account token`);
    t.same(pod.securityContext.seccompProfile, { type: 'RuntimeDefault' }, `${role}: seccomp RuntimeDefault`);
    t.equal(c.image, `localhost/swarm:${packageVersion()}`, `${role}: the image pinned to the package version`);
    t.ok(c.startupProbe && c.livenessProbe, `${role}: startup and liveness probes`);
    t.notOk(c.livenessProbe.exec || c.startupProbe.exec || c.readinessProbe?.exec, `${role}: no exec probe (no Node process inside the memory limit)`);
    t.equal(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold, role === 'hub' ? HUB_STARTUP_BUDGET_S : STARTUP_BUDGET_S, `${role}: the startup budget`);
  }
  t.same(hc.args.slice(hc.args.indexOf('--control-host')), ['--control-host', '0.0.0.0', '--tls-cert', '/certs/hub.crt', '--tls-key', '/certs/hub.key', '--tls-ca', '/certs/ca.crt'], 'the hub: mutual TLS, the control API on the pod IP (HTTPS)');
  t.same([arg(wc, '--tls-ca'), arg(wc, '--tls-cert'), arg(wc, '--tls-key')], ['/certs/ca.crt', '/certs/worker.crt', '/certs/worker.key'], 'workers verify the hub and present their certificate');
  t.equal(arg(wc, '--peer-tls-cert'), '/certs/worker.crt', 'peer links encrypted');
  t.same(hc.livenessProbe.httpGet, { path: '/healthz', port: 7071, scheme: 'HTTPS' }, 'the hub probe dials HTTPS /healthz');
  t.same(wc.livenessProbe.tcpSocket, { port: 'peer' }, 'the worker probe: its peer port, exec-free');
  t.equal(arg(wc, '--peer-port'), '7100', 'a fixed peer port');
  t.same(get('Service', 'swarm-hub').spec.ports.map((p: any) => [p.name, p.port]), [['workers', 7070], ['control', 7071]], 'a Service for the control API');
  t.match(hub.spec.template.metadata.annotations, { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '7071', 'prometheus.io/path': '/metrics' }, 'Prometheus annotations');
  t.same(get('PodDisruptionBudget', 'swarm-worker').spec, { maxUnavailable: 1, selector: { matchLabels: { 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': 'worker' } } }, 'a PDB: one worker drained at a time');
  t.same(wp.topologySpreadConstraints.map((x: any) => x.topologyKey), ['kubernetes.io/hostname', 'topology.kubernetes.io/zone'], 'workers (and holders) spread over nodes and zones');
  t.equal(hp.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels['app.kubernetes.io/component'], 'worker', 'the hub away from the workers');
  t.same(wp.volumes.find((v: any) => v.name === 'models'), { name: 'models', persistentVolumeClaim: { claimName: 'swarm-models', readOnly: true } }, 'the model from a read-only claim');
  t.same(get('PersistentVolumeClaim', 'swarm-models').spec.accessModes, ['ReadOnlyMany']);
  t.notMatch(text, /hostPath/, 'no hostPath');
  const img = YAML.parseAllDocuments(renderDeployment({ target: 'k3s', agents: 2, model: MODEL, modelImage: 'registry.example/models/llama3:q4' })['swarm-k3s.yaml']!).map((d) => d.toJSON()) as any[];
  t.same(img.find((d) => d.metadata?.name === 'swarm-worker' && d.kind === 'Deployment').spec.template.spec.volumes[0], { name: 'models', image: { reference: 'registry.example/models/llama3:q4', pullPolicy: 'IfNotPresent' } }, '--model-image: an image volume');
  t.notOk(img.some((d) => d.metadata?.name === 'swarm-models'), 'and no model claim');
  // NetworkPolicies: default deny (DNS out), workers to the hub's worker port, peers to each other.
  const np = (n: string) => get('NetworkPolicy', n).spec;
  t.same(np('swarm-default-deny').policyTypes, ['Ingress', 'Egress']);
  t.same(np('swarm-hub').ingress[0], { from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': 'worker' } } }], ports: [{ protocol: 'TCP', port: 7070 }] }, 'the hub admits workers on its worker port');
  t.same(np('swarm-worker').egress.map((e: any) => [e.to[0].podSelector.matchLabels['app.kubernetes.io/component'], e.ports[0].port]), [['hub', 7070], ['worker', 7100]], 'workers reach the hub and each other only');
  t.same(np('swarm-worker').ingress, [{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'swarm', 'app.kubernetes.io/component': 'worker' } } }], ports: [{ protocol: 'TCP', port: 7100 }] }], 'peers admit peers only');
});

t.test('podman kube YAML: stable hub pod name, workers by name, model read-only', async (t) => {
  const p = await examplePlan(t);
  const files = renderDeployment({ target: 'podman', agents: 3, model: MODEL, plan: p, engine: 'per-worker' });
  t.same(Object.keys(files).sort(), ['swarm-podman.yaml', 'swarm.kube', 'swarm.network', 'swarm.service']);
  const docs = validateAll(t, files['swarm-podman.yaml']!) as any[];
  t.same(docs.map((d) => d.metadata.name), ['swarm-hub', 'swarm-workers']);
  const ws = docs[1].spec.containers;
  t.equal(ws.length, 3);
  t.same(ws.map((c: any) => c.args[c.args.indexOf('--id') + 1]), ['worker-1', 'worker-2', 'worker-3']);
  t.ok(ws.every((c: any) => c.args.includes('swarm-hub:7070') && c.volumeMounts[0].readOnly === true));
  t.match(files['swarm.kube']!, /Network=swarm.network/);
  const host = renderDeployment({ target: 'podman', agents: 2, model: MODEL, hostNetwork: true, hubPort: 40001, engine: 'per-worker' });
  const hd = YAML.parseAllDocuments(host['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.equal(hd[0].spec.hostNetwork, true);
  t.ok(hd[0].spec.containers[0].args.includes('127.0.0.1'), 'host network: hub binds loopback');
  t.ok(hd[1].spec.containers[0].args.includes('127.0.0.1:40001'));
  for (const pod of [...docs, ...hd]) for (const c of pod.spec.containers) {
    // The hub also gets V8's old space inside its memory limit (NODE_OPTIONS; hub/heap-limit.ts).
    t.same(c.env.filter((e: any) => e.name !== 'NODE_OPTIONS'), [{ name: 'SWARM_TOKEN_FILE', value: '/certs/token' }], `${c.name}: the token from the swarm certs folder, no env literal`);
    t.equal(c.env.some((e: any) => e.name === 'NODE_OPTIONS'), c.name === 'hub', `${c.name}: NODE_OPTIONS on the hub only`);
    t.ok(c.volumeMounts.some((m: any) => m.name === 'certs' && m.mountPath === '/certs' && m.readOnly), `${c.name}: /certs read-only`);
    t.equal(c.livenessProbe.exec.command[1], '/app/deploy/healthcheck.mjs', `${c.name}: a probe (kube play drops the image's HEALTHCHECK)`);
    t.same(c.securityContext.seccompProfile, { type: 'RuntimeDefault' });
  }
  t.same(docs[1].spec.containers[1].livenessProbe.exec.command.slice(2), ['worker', '/var/lib/swarm/worker-2'], 'a worker probe reads its own state folder (its failover heartbeat)');
  t.same(docs[0].spec.volumes.find((v: any) => v.name === 'certs').hostPath, { path: '/etc/swarm/certs', type: 'Directory' });
  t.notMatch(files['swarm-podman.yaml']!, /SWARM_TOKEN[^_]/, 'no token in the YAML');
  t.notOk('swarm.network' in host);
});

t.test('failover: workers get peer ports and a writable state folder (podman: loopback, one port each; k3s: pod IP)', async (t) => {
  const p = await examplePlan(t);
  const pod = renderDeployment({ target: 'podman', agents: 3, model: MODEL, plan: p, failover: true, peerPort: 7200, name: 'sw', engine: 'per-worker' });
  const docs = validateAll(t, pod['swarm-podman.yaml']!) as any[];
  t.same(docs.map((d) => d.metadata.name), ['sw-hub', 'sw-workers']);
  const ws = docs[1].spec.containers;
  const arg = (c: any, flag: string) => c.args[c.args.indexOf(flag) + 1];
  t.ok(ws.every((c: any) => c.args.includes('--failover') && c.args.includes('sw-hub:7070')));
  // the containers of one pod share its network namespace: the peers find each other on loopback
  t.same(ws.map((c: any) => arg(c, '--peer-port')), ['7200', '7201', '7202']);
  t.ok(ws.every((c: any) => !c.args.includes('--peer-host')), 'peer ports stay on 127.0.0.1');
  // every container's node is PID 1 and status files are named by pid: one folder each
  t.same(ws.map((c: any) => arg(c, '--state-dir')), ['/var/lib/swarm/worker-1', '/var/lib/swarm/worker-2', '/var/lib/swarm/worker-3']);
  t.ok(ws.every((c: any) => c.volumeMounts.some((m: any) => m.name === 'worker-state' && m.mountPath === '/var/lib/swarm' && !m.readOnly)));
  t.same(docs[1].spec.volumes.find((v: any) => v.name === 'worker-state').hostPath, { path: '/var/lib/swarm/workers', type: 'Directory' });
  const off = YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 2, model: MODEL, failover: false, engine: 'per-worker' })['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.ok(off[1].spec.containers.every((c: any) => !c.args.includes('--failover') && !c.volumeMounts.some((m: any) => m.name === 'worker-state')), 'off with failover: false (--no-failover)');
  const dflt = YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 2, model: MODEL })['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.ok(dflt[1].spec.containers.every((c: any) => c.args.includes('--failover')), 'on by default');

  const k = renderDeployment({ target: 'k3s', agents: 25, model: MODEL, plan: p, failover: true, engine: 'per-worker' });
  const kd = validateAll(t, k['swarm-k3s.yaml']!) as any[];
  const c = kd[5].spec.template.spec.containers[0];
  t.equal(arg(c, '--peer-host'), '0.0.0.0', 'k3s: each pod binds its peer port off loopback (the token guards it)');
  t.equal(arg(c, '--peer-advertise'), '$(POD_IP):7100', '… and advertises its pod IP');
  t.same(c.env.find((e: any) => e.name === 'POD_IP').valueFrom, { fieldRef: { fieldPath: 'status.podIP' } });
  t.same(c.ports, [{ name: 'peer', containerPort: 7100 }]);
  t.ok(c.volumeMounts.some((m: any) => m.name === 'state' && m.mountPath === '/var/lib/swarm'), 'status file on an emptyDir');
});

t.test('checked-in examples are what the renderer writes', async (t) => {
  const p = await examplePlan(t, 'batched');
  const cases: [string, DeployOptions][] = [
    ['k3s', { target: 'k3s', agents: 25, model: MODEL, plan: p }],
    ['podman', { target: 'podman', agents: 25, model: MODEL, plan: p }],
  ];
  for (const [sub, o] of cases) {
    const files = renderDeployment(o);
    const dir = path.join(EXAMPLES, sub);
    if (process.env.SWARM_UPDATE_EXAMPLES === '1') {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.mkdirSync(dir, { recursive: true });
      for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
    }
    t.same(fs.readdirSync(dir).sort(), Object.keys(files).sort(), `${sub}: same files`);
    for (const [name, text] of Object.entries(files)) {
      t.equal(fs.readFileSync(path.join(dir, name), 'utf8'), text, `${sub}/${name} in step (SWARM_UPDATE_EXAMPLES=1 regenerates)`);
    }
  }
});

t.test('batched engine (the default, as swarm up): a pod\'s agents in one worker container with one engine', async (t) => {
  const p = await examplePlan(t, 'batched');
  const arg = (c: any, flag: string) => c.args[c.args.indexOf(flag) + 1];
  const fixedMi = (pl: typeof p) => Math.ceil((pl.memory.fixed.sharedWeights + pl.memory.fixed.privateWeights + pl.memory.fixed.engine
    + pl.memory.fixed.compute + pl.memory.fixed.workerProcesses / Math.max(1, pl.workerProcesses)) / 2 ** 20);

  // podman: one container, 25 agents (worker-1 … worker-25) in one process, 25 sequences, 25 peer ports
  const pod = validateAll(t, renderDeployment({ target: 'podman', agents: 25, model: MODEL, plan: p })['swarm-podman.yaml']!) as any[];
  const ws = pod[1].spec.containers;
  t.equal(ws.length, 1, 'one worker container');
  const w = ws[0];
  t.same([arg(w, '--driver'), arg(w, '--id'), arg(w, '--count'), arg(w, '--peer-port')], ['batched', 'worker', '25', '7100']);
  t.ok(w.args.includes('sequences=25'), 'a sequence per agent');
  t.equal(arg(w, '--state-dir'), '/var/lib/swarm/worker', 'the engine\'s socket and files in a writable folder');
  t.ok(w.volumeMounts.some((m: any) => m.name === 'worker-state' && m.mountPath === '/var/lib/swarm' && !m.readOnly));
  const request = fixedMi(p) + Math.ceil(p.memory.perAgent.total / 2 ** 20) * 25;
  t.equal(w.resources.limits.memory, `${Math.ceil(request * 1.25)}Mi`, 'the limit holds the model\'s pages, the engine and 25 agents');
  const noFailover = YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 2, model: MODEL, failover: false })['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.ok(noFailover[1].spec.volumes.some((v: any) => v.name === 'worker-state'), 'the writable folder stays without failover (the engine\'s socket)');
  t.notOk(noFailover[1].spec.containers[0].args.includes('--failover'));
  // another driver keeps a container per agent
  const echo = YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 3, model: MODEL, driver: 'echo' })['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.equal(echo[1].spec.containers.length, 3, 'echo: a container per agent, batched or not');

  // k3s: --per-pod agents per pod, one engine each; peer ports a range per pod
  const k = validateAll(t, renderDeployment({ target: 'k3s', agents: 25, model: MODEL, plan: p, perPod: 5 })['swarm-k3s.yaml']!) as any[];
  const dep = k.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-worker');
  t.equal(dep.spec.replicas, 5, '25 agents, 5 per pod: 5 pods');
  const c = dep.spec.template.spec.containers[0];
  t.same([arg(c, '--driver'), arg(c, '--count')], ['batched', '5']);
  t.ok(c.args.includes('sequences=5'));
  t.equal(arg(c, '--peer-advertise'), [7100, 7101, 7102, 7103, 7104].map((port) => `$(POD_IP):${port}`).join(','), 'each agent advertises its own peer port');
  t.same(c.ports.map((x: any) => [x.name, x.containerPort]), [['peer', 7100], ['peer-2', 7101], ['peer-3', 7102], ['peer-4', 7103], ['peer-5', 7104]]);
  t.ok(c.volumeMounts.some((m: any) => m.name === 'state' && m.mountPath === '/var/lib/swarm'), 'the engine\'s folder on an emptyDir');
  const np = k.find((d) => d.kind === 'NetworkPolicy' && d.metadata.name === 'swarm-worker').spec;
  t.same(np.ingress[0].ports, [{ protocol: 'TCP', port: 7100, endPort: 7104 }], 'peers admitted on the whole range');
  t.same(k.find((d) => d.kind === 'Service' && d.metadata.name === 'swarm-peers').spec.ports.map((x: any) => x.port), [7100, 7101, 7102, 7103, 7104]);
  const one = YAML.parseAllDocuments(renderDeployment({ target: 'k3s', agents: 4, model: MODEL })['swarm-k3s.yaml']!).map((d) => d.toJSON()) as any[];
  t.equal(one.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-worker').spec.replicas, 1);
  t.throws(() => renderDeployment({ target: 'k3s', agents: 25, model: MODEL, perPod: 4 }), { code: 'SWARM_ERR_CONFIG' }, 'pods of a Deployment run the same number of agents');
  // per-worker stays selectable
  const per = YAML.parseAllDocuments(renderDeployment({ target: 'k3s', agents: 4, model: MODEL, engine: 'per-worker' })['swarm-k3s.yaml']!).map((d) => d.toJSON()) as any[];
  const pw = per.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-worker');
  t.equal(pw.spec.replicas, 4);
  t.equal(arg(pw.spec.template.spec.containers[0], '--driver'), 'embedded');
});

t.test('podman across hosts with the batched engine: one worker container per host, its share of the agents', async (t) => {
  const hosts = [{ name: 'hub', addr: '10.0.0.1' }, { name: 'w1', addr: '10.0.0.2' }, { name: 'w2', addr: '10.0.0.3' }];
  const files = renderDeployment({ target: 'podman', agents: 5, model: MODEL, hosts });
  const arg = (c: any, flag: string) => c.args[c.args.indexOf(flag) + 1];
  const w = (name: string) => (YAML.parseAllDocuments(files[name]!).map((d) => d.toJSON()) as any[])[0].spec.containers;
  t.same(w('swarm-w1.yaml').map((c: any) => [arg(c, '--id'), arg(c, '--count'), arg(c, '--driver')]), [['w1', '3', 'batched']]);
  t.same(w('swarm-w2.yaml').map((c: any) => [arg(c, '--id'), arg(c, '--count'), arg(c, '--peer-host')]), [['w2', '2', '10.0.0.3']]);
  t.ok(w('swarm-w2.yaml')[0].args.includes('sequences=2'));
});

t.test('every pod has an init as PID 1 (shareProcessNamespace): node as PID 1 leaves orphaned engine and command processes as zombies', async (t) => {
  const pods = (text: string) => YAML.parseAllDocuments(text).map((d) => d.toJSON() as any)
    .flatMap((o) => (o?.kind === 'Pod' ? [o.spec] : o?.spec?.template?.spec ? [o.spec.template.spec] : []));
  const renders: [string, Record<string, string>][] = [
    ['k3s', renderDeployment({ target: 'k3s', agents: 4, model: MODEL })],
    ['podman', renderDeployment({ target: 'podman', agents: 4, model: MODEL })],
    ['podman hosts', renderDeployment({ target: 'podman', agents: 4, model: MODEL, hosts: [{ name: 'a', addr: '10.0.0.1' }, { name: 'b', addr: '10.0.0.2' }] })],
  ];
  for (const [what, files] of renders) {
    const specs = Object.entries(files).filter(([n]) => n.endsWith('.yaml')).flatMap(([, text]) => pods(text));
    t.ok(specs.length >= 2, `${what}: hub and worker pods`);
    t.ok(specs.every((s) => s.shareProcessNamespace === true), `${what}: each shares its pause process as PID 1, which reaps`);
  }
});
