// k3s manifests checked for what schemas miss: selectors match pod labels, every referenced Secret,
// ConfigMap and PersistentVolumeClaim is in the render, ports are named consistently from Service to
// container, and failover's peer port and address wiring is present. (Schema validity: deploy-render.test.ts.)
import t from 'tap';
import YAML from 'yaml';
import { K3S_SECRETS, renderDeployment } from '../../deploy/render/index.js';

type Obj = Record<string, any>;
const MODEL = '/mnt/models/m.gguf';

const docsOf = (o: Parameters<typeof renderDeployment>[0]): Obj[] =>
  YAML.parseAllDocuments(renderDeployment(o)['swarm-k3s.yaml']!).map((d) => d.toJSON() as Obj);

/** Pod templates of the workload objects, with the object's name. */
function templates(docs: Obj[]): { owner: Obj; labels: Record<string, string>; spec: Obj }[] {
  return docs.filter((d) => d.spec?.template).map((d) => ({ owner: d, labels: d.spec.template.metadata?.labels ?? {}, spec: d.spec.template.spec }));
}

const subset = (sel: Record<string, string>, labels: Record<string, string>) => Object.entries(sel).every(([k, v]) => labels[k] === v);

/** Every problem found, as sentences; empty when the render is consistent. */
function k3sProblems(docs: Obj[], o: { failover: boolean }): string[] {
  const out: string[] = [];
  const ns = docs.find((d) => d.kind === 'Namespace')?.metadata.name;
  const named = (kind: string) => new Set(docs.filter((d) => d.kind === kind).map((d) => d.metadata.name));
  // The Secrets the operator creates from `swarm certs` (never rendered), with their keys, count as present.
  const secrets = new Set([...named('Secret'), ...Object.keys(K3S_SECRETS)]), configMaps = named('ConfigMap'), claims = named('PersistentVolumeClaim'), services = named('Service');
  for (const d of docs) if (d.kind !== 'Namespace' && d.metadata.namespace !== ns) out.push(`${d.kind} ${d.metadata.name} is not in namespace ${ns}`);
  const hasKey = (name: string, key: string) => K3S_SECRETS[name]?.includes(key) || docs.some((d) => d.kind === 'Secret' && d.metadata.name === name && (d.stringData?.[key] !== undefined || d.data?.[key] !== undefined));
  const tpls = templates(docs);
  for (const tp of tpls) {
    const sel = tp.owner.spec.selector?.matchLabels ?? {};
    if (!Object.keys(sel).length || !subset(sel, tp.labels)) out.push(`${tp.owner.kind} ${tp.owner.metadata.name}: selector ${JSON.stringify(sel)} does not match its pod labels`);
    for (const c of tp.spec.containers) {
      for (const e of c.env ?? []) {
        const s = e.valueFrom?.secretKeyRef, m = e.valueFrom?.configMapKeyRef;
        if (s && !secrets.has(s.name)) out.push(`${c.name}: env ${e.name} names Secret ${s.name}, not in the render`);
        if (s && !hasKey(s.name, s.key)) out.push(`${c.name}: Secret ${s.name} has no key ${s.key}`);
        if (m && !configMaps.has(m.name)) out.push(`${c.name}: env ${e.name} names ConfigMap ${m.name}, not in the render`);
      }
      const vols = new Set((tp.spec.volumes ?? []).map((v: Obj) => v.name));
      for (const m of c.volumeMounts ?? []) if (!vols.has(m.name)) out.push(`${c.name}: mounts ${m.name}, no such volume`);
      // `$(VAR)` in args is expanded by Kubernetes only from the container's own env.
      for (const a of c.args ?? []) for (const [, v] of String(a).matchAll(/\$\((\w+)\)/g)) if (!(c.env ?? []).some((e: Obj) => e.name === v)) out.push(`${c.name}: arg ${a} uses $(${v}), not in its env`);
    }
    for (const v of tp.spec.volumes ?? []) {
      if (v.secret && !secrets.has(v.secret.secretName)) out.push(`volume ${v.name}: Secret ${v.secret.secretName} not in the render`);
      for (const src of v.projected?.sources ?? []) {
        if (!src.secret) continue;
        if (!secrets.has(src.secret.name)) out.push(`volume ${v.name}: Secret ${src.secret.name} not in the render`);
        else for (const it of src.secret.items ?? []) if (!hasKey(src.secret.name, it.key)) out.push(`volume ${v.name}: Secret ${src.secret.name} has no key ${it.key}`);
      }
      if (v.configMap && !configMaps.has(v.configMap.name)) out.push(`volume ${v.name}: ConfigMap ${v.configMap.name} not in the render`);
      if (v.persistentVolumeClaim && !claims.has(v.persistentVolumeClaim.claimName)) out.push(`volume ${v.name}: PVC ${v.persistentVolumeClaim.claimName} not in the render`);
    }
  }
  for (const svc of docs.filter((d) => d.kind === 'Service')) {
    const pods = tpls.filter((tp) => subset(svc.spec.selector ?? {}, tp.labels));
    if (!pods.length) { out.push(`Service ${svc.metadata.name}: selector matches no pod template`); continue; }
    for (const p of svc.spec.ports) {
      if (!p.name) out.push(`Service ${svc.metadata.name}: port ${p.port} has no name`);
      for (const tp of pods) {
        const ports = tp.spec.containers.flatMap((c: Obj) => c.ports ?? []);
        const target = p.targetPort ?? p.port;
        const hit = ports.find((cp: Obj) => (typeof target === 'string' ? cp.name === target : cp.containerPort === target));
        if (!hit) out.push(`Service ${svc.metadata.name}: targetPort ${target} is no container port of ${tp.owner.metadata.name}`);
        else if (hit.name !== p.name) out.push(`Service ${svc.metadata.name}: port named ${p.name}, container port named ${hit.name}`);
      }
    }
  }
  // Workers reach the hub through its Service, by name and port.
  for (const tp of tpls) for (const c of tp.spec.containers) {
    const i = (c.args ?? []).indexOf('--hub');
    if (i < 0) continue;
    const [host, port] = String(c.args[i + 1]).split(':');
    const svc = docs.find((d) => d.kind === 'Service' && d.metadata.name === host);
    if (!svc || !services.has(host!)) out.push(`${c.name}: --hub ${c.args[i + 1]} names no Service`);
    else if (!svc.spec.ports.some((p: Obj) => String(p.port) === port)) out.push(`${c.name}: --hub port ${port} is not a port of Service ${host}`);
  }
  const worker = tpls.find((tp) => tp.labels['app.kubernetes.io/component'] === 'worker');
  const wc = worker?.spec.containers[0];
  if (!wc) return [...out, 'no worker pod template'];
  const arg = (k: string) => { const i = wc.args.indexOf(k); return i < 0 ? undefined : String(wc.args[i + 1]); };
  if (o.failover) {
    if (!wc.args.includes('--failover')) out.push('worker: no --failover');
    const peer = (wc.ports ?? []).find((p: Obj) => p.name === 'peer');
    if (!peer) out.push('worker: no container port named peer');
    if (peer && arg('--peer-port') !== String(peer.containerPort)) out.push(`worker: --peer-port ${arg('--peer-port')} is not the peer container port ${peer.containerPort}`);
    const adv = arg('--peer-advertise') ?? arg('--advertise');
    if (!adv || !adv.startsWith('$(POD_IP)')) out.push(`worker: peers would dial ${adv ?? 'its bind address'}, not the pod IP`);
    if (!(wc.env ?? []).some((e: Obj) => e.name === 'POD_IP' && e.valueFrom?.fieldRef?.fieldPath === 'status.podIP')) out.push('worker: POD_IP not from the downward API');
    if (arg('--peer-host') === '127.0.0.1') out.push('worker: peer port on loopback, unreachable from other pods');
    if (!(wc.env ?? []).some((e: Obj) => e.name === 'SWARM_TOKEN_FILE' && String(e.value).startsWith('/certs/'))) out.push('worker: a peer port off loopback without a token');
    if (!docs.some((d) => d.kind === 'Service' && d.spec.clusterIP === 'None' && d.spec.ports.some((p: Obj) => p.name === 'peer'))) out.push('no headless Service over the peer ports');
    if (!(wc.volumeMounts ?? []).some((m: Obj) => m.mountPath === '/var/lib/swarm')) out.push('worker: no writable state folder for the failover status');
  } else if (wc.args.includes('--failover')) out.push('worker: --failover although failover is off');
  const hubTpl = tpls.find((tp) => tp.labels['app.kubernetes.io/component'] === 'hub');
  const hubState = hubTpl?.spec.volumes.find((v: Obj) => v.name === 'state');
  if (!hubState?.persistentVolumeClaim) out.push('hub: the journal is not on a PersistentVolumeClaim');
  if (hubTpl?.owner.spec.strategy?.type !== 'Recreate') out.push('hub: two hubs could share the journal during a rollout (strategy not Recreate)');
  return out;
}

t.test('k3s renders are consistent: selectors, references, port names, failover wiring (on by default)', async (t) => {
  for (const workers of ['deployment', 'daemonset'] as const) {
    for (const failover of [undefined, true, false]) {
      const docs = docsOf({ target: 'k3s', agents: 5, model: MODEL, workers, ...(failover === undefined ? {} : { failover }) });
      const on = failover ?? true;
      t.same(k3sProblems(docs, { failover: on }), [], `${workers}, failover ${failover === undefined ? 'default (on)' : failover}: no problem`);
    }
  }
  const docs = docsOf({ target: 'k3s', agents: 5, model: MODEL, storageClass: 'local-path', stateSize: '2Gi' });
  const pvc = docs.find((d) => d.kind === 'PersistentVolumeClaim' && d.metadata.name === 'swarm-hub-state')!;
  t.same(pvc.spec, { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '2Gi' } }, storageClassName: 'local-path' }, 'the journal claim');
});

t.test('the checker finds what it is for: broken renders are reported', async (t) => {
  const base = () => docsOf({ target: 'k3s', agents: 3, model: MODEL });
  const w = (docs: Obj[]) => docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'swarm-worker')!;
  const cases: [string, (d: Obj[]) => void, RegExp][] = [
    ['selector', (d) => { w(d).spec.selector.matchLabels['app.kubernetes.io/component'] = 'wrk'; }, /selector .* does not match/],
    ['missing secret', (d) => { w(d).spec.template.spec.volumes.find((v: Obj) => v.name === 'certs').projected.sources[1].secret.name = 'swarm-tlz'; }, /Secret swarm-tlz not in the render/],
    ['missing key', (d) => { w(d).spec.template.spec.volumes.find((v: Obj) => v.name === 'certs').projected.sources[1].secret.items[0].key = 'ca.pem'; }, /Secret swarm-tls has no key ca\.pem/],
    ['missing claim', (d) => { d.splice(d.findIndex((x) => x.kind === 'PersistentVolumeClaim'), 1); }, /PVC swarm-hub-state not in the render/],
    ['port name', (d) => { d.find((x) => x.kind === 'Service' && x.metadata.name === 'swarm-hub')!.spec.ports[0].name = 'work'; }, /port named work, container port named workers/],
    ['peer port', (d) => { w(d).spec.template.spec.containers[0].ports[0].containerPort = 7999; }, /--peer-port 7100 is not the peer container port 7999/],
    ['pod ip', (d) => { const c = w(d).spec.template.spec.containers[0]; c.env = c.env.filter((e: Obj) => e.name !== 'POD_IP'); }, /uses \$\(POD_IP\), not in its env/],
    ['headless', (d) => { d.splice(d.findIndex((x) => x.metadata?.name === 'swarm-peers'), 1); }, /no headless Service/],
  ];
  for (const [name, breakIt, expect] of cases) {
    const d = base();
    breakIt(d);
    t.match(k3sProblems(d, { failover: true }).join('\n'), expect, `found: ${name}`);
  }
});
