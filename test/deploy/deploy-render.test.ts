// swarm deploy render: k3s manifests validate against the Kubernetes schemas (offline, kubernetes-models),
// podman YAML has the shape podman kube play needs, and the checked-in examples match the renderer.
// Regenerate the examples with: SWARM_UPDATE_EXAMPLES=1 npx tap test/deploy/deploy-render.test.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { Namespace, PersistentVolumeClaim, Secret, Service } from 'kubernetes-models/v1';
import { DaemonSet, Deployment } from 'kubernetes-models/apps/v1';
import { Pod } from 'kubernetes-models/v1';
import { plan, readModelShape } from '../../deploy/plan/index.js';
import { renderDeployment, TOKEN_PLACEHOLDER, type DeployOptions } from '../../deploy/render/index.js';
import { llama3_8bShape, writeGguf } from '../helpers/gguf-writer.js';
import { ROOT } from '../helpers/paths.js';

const EXAMPLES = path.join(ROOT, 'deploy/examples');
const MODEL = '/mnt/models/llama-3-8b-instruct.Q4_K_M.gguf';

const KINDS: Record<string, new (o: never) => { validate(): void }> = {
  Namespace, Secret, Service, Deployment, DaemonSet, Pod, PersistentVolumeClaim,
} as never;

function validateAll(t: Test, text: string): Record<string, unknown>[] {
  const docs = YAML.parseAllDocuments(text).map((d) => d.toJSON() as Record<string, unknown>);
  for (const d of docs) {
    const Kind = KINDS[String(d.kind)];
    t.ok(Kind, `known kind ${String(d.kind)}`);
    t.doesNotThrow(() => new Kind!(d as never).validate(), `${String(d.kind)} ${String((d.metadata as { name?: string }).name)} validates`);
  }
  return docs;
}

// The examples' plan: the Llama-3-8B shape, per-worker engines with --no-repack and a 64-token micro-batch.
async function examplePlan(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-render-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const s = llama3_8bShape();
  const file = path.join(dir, 'm.gguf');
  writeGguf(file, s.meta, s.tensors);
  return plan(await readModelShape(file), { agents: 25, engine: 'per-worker', repack: false, ubatch: 64 });
}

t.test('k3s manifests validate against the Kubernetes schemas', async (t) => {
  const p = await examplePlan(t);
  for (const workers of ['deployment', 'daemonset'] as const) {
    const files = renderDeployment({ target: 'k3s', agents: 25, model: MODEL, plan: p, workers, token: 's3cret' });
    const docs = validateAll(t, files['swarm-k3s.yaml']!);
    t.same(docs.map((d) => d.kind), ['Namespace', 'Secret', 'PersistentVolumeClaim', 'Deployment', 'Service', workers === 'daemonset' ? 'DaemonSet' : 'Deployment', 'Service']);
    const w = docs[5] as any;
    const c = w.spec.template.spec.containers[0];
    t.equal(c.resources.requests.memory, `${Math.ceil(p.memory.perAgent.total / 2 ** 20)}Mi`, 'request from the plan');
    t.same(c.volumeMounts.find((m: any) => m.name === 'models'), { name: 'models', mountPath: '/models', readOnly: true });
    t.same(w.spec.template.spec.volumes.find((v: any) => v.name === 'models').hostPath, { path: '/mnt/models', type: 'Directory' });
    t.ok(c.livenessProbe.exec, 'worker liveness probe');
    t.same(c.env[0].valueFrom.secretKeyRef, { name: 'swarm-token', key: 'token' });
    t.ok(c.args.includes('swarm-hub:7070'), 'workers find the hub through the Service');
    const hub = docs[3] as any;
    t.ok(hub.spec.template.spec.containers[0].readinessProbe.tcpSocket);
    if (workers === 'deployment') t.equal(w.spec.replicas, 25);
  }
  // the validator is real: a wrong type is rejected
  t.throws(() => new Deployment({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' }, spec: { replicas: 'three' } } as never).validate());
});

t.test('podman kube YAML: stable hub pod name, workers by name, model read-only', async (t) => {
  const p = await examplePlan(t);
  const files = renderDeployment({ target: 'podman', agents: 3, model: MODEL, plan: p, token: 'tok' });
  t.same(Object.keys(files).sort(), ['swarm-podman.yaml', 'swarm.kube', 'swarm.network', 'swarm.service']);
  const docs = validateAll(t, files['swarm-podman.yaml']!) as any[];
  t.same(docs.map((d) => d.metadata.name), ['swarm-hub', 'swarm-workers']);
  const ws = docs[1].spec.containers;
  t.equal(ws.length, 3);
  t.same(ws.map((c: any) => c.args[c.args.indexOf('--id') + 1]), ['worker-1', 'worker-2', 'worker-3']);
  t.ok(ws.every((c: any) => c.args.includes('swarm-hub:7070') && c.volumeMounts[0].readOnly === true));
  t.match(files['swarm.kube']!, /Network=swarm.network/);
  const host = renderDeployment({ target: 'podman', agents: 2, model: MODEL, hostNetwork: true, hubPort: 40001 });
  const hd = YAML.parseAllDocuments(host['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.equal(hd[0].spec.hostNetwork, true);
  t.ok(hd[0].spec.containers[0].args.includes('127.0.0.1'), 'host network: hub binds loopback');
  t.ok(hd[1].spec.containers[0].args.includes('127.0.0.1:40001'));
  t.match(hd[0].spec.containers[0].env[0].value, TOKEN_PLACEHOLDER);
  t.notOk('swarm.network' in host);
});

t.test('failover: workers get peer ports and a writable state folder (podman: loopback, one port each; k3s: pod IP)', async (t) => {
  const p = await examplePlan(t);
  const pod = renderDeployment({ target: 'podman', agents: 3, model: MODEL, plan: p, token: 'tok', failover: true, peerPort: 7200, name: 'sw' });
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
  const off = YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 2, model: MODEL, failover: false })['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.ok(off[1].spec.containers.every((c: any) => !c.args.includes('--failover') && c.volumeMounts.length === 1), 'off with failover: false (--no-failover)');
  const dflt = YAML.parseAllDocuments(renderDeployment({ target: 'podman', agents: 2, model: MODEL })['swarm-podman.yaml']!).map((d) => d.toJSON()) as any[];
  t.ok(dflt[1].spec.containers.every((c: any) => c.args.includes('--failover')), 'on by default');

  const k = renderDeployment({ target: 'k3s', agents: 25, model: MODEL, plan: p, token: 's3cret', failover: true });
  const kd = validateAll(t, k['swarm-k3s.yaml']!) as any[];
  const c = kd[5].spec.template.spec.containers[0];
  t.equal(arg(c, '--peer-host'), '0.0.0.0', 'k3s: each pod binds its peer port off loopback (the token guards it)');
  t.equal(arg(c, '--peer-advertise'), '$(POD_IP):7100', '… and advertises its pod IP');
  t.same(c.env.find((e: any) => e.name === 'POD_IP').valueFrom, { fieldRef: { fieldPath: 'status.podIP' } });
  t.same(c.ports, [{ name: 'peer', containerPort: 7100 }]);
  t.ok(c.volumeMounts.some((m: any) => m.name === 'state' && m.mountPath === '/var/lib/swarm'), 'status file on an emptyDir');
});

t.test('checked-in examples are what the renderer writes', async (t) => {
  const p = await examplePlan(t);
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
