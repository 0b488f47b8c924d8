// `swarm deploy render --target podman --hosts …`: one pod per host in the host's network, peers on the
// host addresses, mutual TLS. The rendered commands are then run as they are (paths mapped to a temp
// folder) on the namespace hosts, without Podman: the hub on A, workers on B and C join over TLS, their
// peer ports are on their hosts' addresses, and tasks complete.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { spawnSync } from 'node:child_process';
import { Pod } from 'kubernetes-models/v1';
import { renderDeployment } from '../../deploy/render/index.js';
import { CLI, tempDir, until } from '../helpers/cli.js';
import { expectExactlyOnce } from '../helpers/failover.js';
import { makeHosts, requireNamespaces, type Host } from '../helpers/netns.js';

type Obj = Record<string, any>;
const pods = (files: Record<string, string>) => Object.fromEntries(Object.entries(files).map(([n, text]) => [n, YAML.parseAllDocuments(text).map((d) => d.toJSON() as Obj)]));

t.test('podman across hosts: one pod per host, host network, peers on host addresses, failover on by default', async (t) => {
  const files = pods(renderDeployment({ target: 'podman', agents: 5, model: '/m/x.gguf', engine: 'per-worker', hosts: [{ name: 'hub', addr: '10.0.0.1' }, { name: 'w1', addr: '10.0.0.2' }, { name: 'w2', addr: '10.0.0.3' }] }));
  t.same(Object.keys(files).sort(), ['swarm-hub.yaml', 'swarm-w1.yaml', 'swarm-w2.yaml'], 'one file per host');
  for (const [name, docs] of Object.entries(files)) {
    t.equal(docs.length, 1, `${name}: one pod`);
    t.doesNotThrow(() => new Pod(docs[0] as never).validate(), `${name}: the Pod validates`);
    t.equal(docs[0]!.spec.hostNetwork, true, `${name}: in the host's network`);
  }
  const ws = [...files['swarm-w1.yaml']![0]!.spec.containers, ...files['swarm-w2.yaml']![0]!.spec.containers];
  t.equal(ws.length, 5, 'the agents spread over the worker hosts (3 + 2)');
  const arg = (c: Obj, k: string) => c.args[c.args.indexOf(k) + 1];
  t.ok(ws.every((c: Obj) => c.args.includes('--failover') && arg(c, '--hub') === '10.0.0.1:7070'), 'failover on, the hub at its host address');
  t.same(files['swarm-w1.yaml']![0]!.spec.containers.map((c: Obj) => `${arg(c, '--peer-host')}:${arg(c, '--peer-port')}`), ['10.0.0.2:7100', '10.0.0.2:7101', '10.0.0.2:7102'], 'peer ports on the host address, one each');
  const off = pods(renderDeployment({ target: 'podman', agents: 2, model: '/m/x.gguf', failover: false, hosts: [{ name: 'hub', addr: '10.0.0.1' }, { name: 'w1', addr: '10.0.0.2' }] }));
  t.ok(off['swarm-w1.yaml']![0]!.spec.containers.every((c: Obj) => !c.args.includes('--failover')), '--no-failover turns it off');
});

t.test('the rendered commands run on three hosts: workers join over mutual TLS, peers on host addresses, tasks complete', async (t) => {
  if (!requireNamespaces(t)) return;
  const dir = tempDir(t); // before the hosts: their teardown (last registered, first run) ends every process first
  const bed = makeHosts(t, ['a', 'b', 'c']);
  const [a, b, c] = bed.hosts as [Host, Host, Host];
  const certs = path.join(dir, 'certs');
  t.equal(spawnSync(process.execPath, [CLI, 'certs', '--dir', certs, '--host', `hub=${a.addr}`, '--host', `w1=${b.addr}`, '--host', `w2=${c.addr}`]).status, 0, 'swarm certs');
  const token = fs.readFileSync(path.join(certs, 'token'), 'utf8').trim();
  const files = pods(renderDeployment({ target: 'podman', agents: 4, model: '/models/none.gguf', driver: 'echo',
    hosts: [{ name: 'hub', addr: a.addr }, { name: 'w1', addr: b.addr }, { name: 'w2', addr: c.addr }] }));
  // Container paths to this test's folders: /certs, and /var/lib/swarm (one per host).
  const run = (h: Host, name: string) => {
    const state = path.join(dir, h.name);
    fs.mkdirSync(state, { recursive: true });
    return files[name]![0]!.spec.containers.map((ct: Obj) => {
      const args = (ct.args as string[]).filter((x, i, all) => !(x === '--model' || all[i - 1] === '--model'))
        .map((x) => x.replace(/^\/certs\//, `${certs}/`).replace(/^\/var\/lib\/swarm/, state));
      return h.swarmBg([...args, '--log-file', path.join(state, `${ct.name}.log`)], { env: { SWARM_TOKEN_FILE: String(ct.env[0].value).replace(/^\/certs\//, `${certs}/`) } });
    });
  };
  run(a, 'swarm-hub.yaml');
  run(b, 'swarm-w1.yaml');
  run(c, 'swarm-w2.yaml');
  const remote = ['--hub-url', `https://${a.addr}:7071`, '--token', token, '--tls-ca', path.join(certs, 'ca.crt')];
  const status = () => { const r = a.swarm(['status', '--json', ...remote], { timeoutMs: 15_000 }); try { return JSON.parse(r.stdout) as Obj; } catch { return undefined; } };
  t.ok(await until(() => status()?.failover?.workers?.length === 4, 60_000, 500), 'four workers joined the hub with a peer port each');
  const peers = (status()!.failover.workers as Obj[]).map((p) => p.peerAddr as string).sort();
  t.same(peers, [`${b.addr}:7100`, `${b.addr}:7101`, `${c.addr}:7100`, `${c.addr}:7101`], 'peers on the host addresses');
  const ids = Array.from({ length: 40 }, (_, i) => `t-${String(i).padStart(3, '0')}`);
  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, ids.map((id) => JSON.stringify({ id, prompt: `task ${id}` })).join('\n') + '\n');
  const sub = a.swarm(['submit', '--file', file, '--wait', '--json', ...remote], { timeoutMs: 120_000 });
  t.equal(sub.code, 0, `40 tasks done (${sub.stderr.slice(-200)})`);
  expectExactlyOnce(t, path.join(dir, 'a'), ids);
});
