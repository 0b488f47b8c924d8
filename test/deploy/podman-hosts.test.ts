// The Podman deployment `swarm deploy render --hosts` writes, run for real on two hosts: each host a
// network namespace on a bridge (test/helpers/netns.ts), each rendered file `podman kube play`ed in
// its host's network namespace (the pods use the host network, as rendered: here that is the
// namespace's). Every client runs inside a pod (`podman exec`): submits, status, the final read.
// The hub's pod is killed mid-run; the workers finish by gossip and hand back to the hub's pod started
// again: lost 0, duplicated 0, changed 0, unexpected 0 (test/helpers/checker.ts).
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Checker, journalResults, type FinalTask } from '../helpers/checker.js';
import { swarm, tempDir } from '../helpers/cli.js';
import { agents, type AgentView } from '../helpers/failover.js';
import { makeHosts, requireNamespaces, type Host } from '../helpers/netns.js';
import { podman, podmanMissing, removeAll, testImage } from '../helpers/podman.js';
import { until } from '../helpers/wait.js';

const NAME = `swh${process.pid}`;
const AGENTS = 3;
const TASKS = 60;
const UID = 10001; // the image's user: it must be able to read the keys and write the state folders

t.test('podman on two hosts: the rendered pods run in two namespaces; the hub\'s pod killed mid-run: gossip, handback, nothing lost', { timeout: 900_000 }, async (t) => {
  if (podmanMissing(t)) return;
  if (!requireNamespaces(t)) return;
  // tempDir first: teardowns run last-registered first, so the pods and namespaces go before the folders.
  const dir = tempDir(t);
  const bed = makeHosts(t, ['hub', 'w1']);
  const [a, b] = bed.hosts as [Host, Host];
  const out = path.join(dir, 'render');
  const hubPod = `${NAME}-hub`, workerPod = `${NAME}-workers-w1`;
  bed.onCleanup(() => {
    for (const f of ['swarm-hub.yaml', 'swarm-w1.yaml']) if (fs.existsSync(path.join(out, f))) podman(['kube', 'down', path.join(out, f)]);
    removeAll({ pods: [hubPod, workerPod] });
  });

  const IMAGE = await testImage(t);
  if (!IMAGE) return;

  // Folders as the operator makes them (docs/deploy.md): certificates, the hub's journal, the workers' state.
  const state = path.join(dir, 'hosts');
  const certs = path.join(state, 'certs'), hubState = path.join(state, 'hub'), workerState = path.join(state, 'workers'), models = path.join(state, 'models');
  for (const d of [hubState, workerState, models]) fs.mkdirSync(d, { recursive: true });
  t.equal(swarm(['certs', '--dir', certs, '--host', `hub=${a.addr}`, '--host', `w1=${b.addr}`]).code, 0, 'swarm certs');
  for (const d of [certs, hubState, workerState]) { fs.chownSync(d, UID, UID); for (const f of fs.readdirSync(d)) fs.chownSync(path.join(d, f), UID, UID); }

  // The echo driver needs no model; the rendered pods still mount the model's folder read-only.
  const render = swarm(['deploy', 'render', '--target', 'podman', '--hosts', `hub=${a.addr},w1=${b.addr}`, '--agents', String(AGENTS),
    '--model', path.join(models, 'none.gguf'), '--image', IMAGE, '--driver', 'echo', '--driver-opt', 'latency_ms=200',
    '--certs-dir', certs, '--state-dir', hubState, '--worker-state-dir', workerState, '--name', NAME, '--out', out]);
  t.equal(render.code, 0, `swarm deploy render --hosts (${render.stderr.trim()})`);
  t.same(fs.readdirSync(out).sort(), ['swarm-hub.yaml', 'swarm-w1.yaml'], 'one file per host');
  t.match(fs.readFileSync(path.join(out, 'swarm-w1.yaml'), 'utf8'), /--failover/, 'failover on by default');

  // Each file played in its own host's network namespace, as it would be on its own machine.
  const play = (h: Host, f: string) => h.netExec(['podman', 'kube', 'play', path.join(out, f)]);
  const hubPlay = play(a, 'swarm-hub.yaml');
  t.equal(hubPlay.code, 0, `the hub's pod plays on host ${a.addr} (${hubPlay.stderr.trim().slice(-300)})`);
  const wPlay = play(b, 'swarm-w1.yaml');
  t.equal(wPlay.code, 0, `the workers' pod plays on host ${b.addr} (${wPlay.stderr.trim().slice(-300)})`);
  const hubC = `${hubPod}-hub`;
  const workerC = (i: number) => `${workerPod}-worker-${i}`;
  const podExists = (pod: string) => podman(['pod', 'exists', pod]).code === 0;
  const nsOf = (container: string) => {
    const pid = podman(['inspect', container, '--format', '{{.State.Pid}}']).out.trim();
    try { return fs.readlinkSync(`/proc/${pid}/ns/net`); } catch { return `none (${pid})`; }
  };
  // A namespace's identity is its inode: /proc/PID/ns/net of a process in it reads net:[INODE].
  const netOf = (h: Host) => `net:[${fs.statSync(`/run/netns/${h.ns}`).ino}]`;
  t.ok(podExists(hubPod) && podExists(workerPod), 'both pods exist');
  t.equal(nsOf(hubC), netOf(a), 'the hub\'s container is in host A\'s network namespace');
  t.equal(nsOf(workerC(1)), netOf(b), 'the workers\' containers are in host B\'s');
  t.not(nsOf(hubC), nsOf(workerC(1)), 'two pods, two namespaces');

  // Clients run in a pod: the operator's CLI inside the hub's container, over HTTPS to A's address.
  const remote = ['--hub-url', `https://${a.addr}:7071`, '--tls-ca', '/certs/ca.crt'];
  // `podman exec` runs in its host's namespace: a host-network container has no network namespace of
  // its own to join, so the exec'd client would otherwise stay in the caller's (the root) namespace.
  const cli = (h: Host, container: string, args: string[], input?: string, timeoutMs = 60_000) => {
    const r = h.netExec(['podman', 'exec', '-e', 'SWARM_TOKEN_FILE=/certs/token', ...(input === undefined ? [] : ['-i']), container, 'node', '/app/dist/cli/main.js', ...args, ...remote], { timeoutMs, input });
    return { code: r.code, out: r.stdout, err: r.stderr };
  };
  const lastJson = (text: string): any => { try { return JSON.parse(text.trim().split('\n').pop()!); } catch { return undefined; } };
  const status = (): any => lastJson(cli(a, hubC, ['status', '--json'], undefined, 20_000).out);
  t.ok(await until(() => status()?.failover?.workers?.length === AGENTS, 90_000, 500), `${AGENTS} workers on host B joined the hub on host A`);
  const s0 = status();
  t.same(s0.failover.workers.map((w: any) => w.peerAddr).sort(), [0, 1, 2].map((i) => `${b.addr}:${7100 + i}`), 'peer ports on host B\'s address');
  t.ok(s0.workers.every((w: any) => w.addr === b.addr), `the hub sees the workers coming from ${b.addr}`);
  // kube play drops the image's HEALTHCHECK: the rendered probes stand in, run where the pods' network is.
  t.match(podman(['inspect', hubC, '--format', '{{json .Config.Healthcheck}}']).out, /healthcheck\.mjs/, 'kube play gave the hub container the rendered probe');
  const hubProbe = a.netExec(['podman', 'healthcheck', 'run', hubC]);
  t.equal(hubProbe.code, 0, `the hub probe passes: HTTPS on host A's address (${hubProbe.stdout.trim()} ${hubProbe.stderr.trim()})`);
  t.equal(b.netExec(['podman', 'healthcheck', 'run', workerC(1)]).code, 0, 'a worker probe passes (its failover heartbeat)');

  const ids = Array.from({ length: TASKS }, (_, i) => `p-${String(i).padStart(3, '0')}`);
  const jsonl = ids.map((id) => JSON.stringify({ id, prompt: `task ${id}` })).join('\n') + '\n';
  const checker = new Checker();
  const sub = cli(a, hubC, ['submit', '--file', '-', '--json'], jsonl);
  const accepted: string[] = (lastJson(sub.out)?.accepted ?? []).map((x: { id: string }) => x.id);
  if (accepted.length) checker.acceptedIds(accepted); else checker.pendingIds(ids);
  t.equal(accepted.length, TASKS, `${TASKS} tasks accepted (swarm submit in the hub's pod)`);

  const views = (): AgentView[] => Array.from({ length: AGENTS }, (_, i) => agents(path.join(workerState, `w1-${i + 1}`))).flat();
  t.ok(await until(() => (status()?.tasks?.done ?? 0) >= 6, 60_000, 250), 'the run is under way');
  t.equal(podman(['pod', 'kill', hubPod]).code, 0, 'the hub\'s pod is killed (SIGKILL)');
  const killedAt = Date.now();
  t.ok(await until(() => { const v = views(); return v.length === AGENTS && v.every((x) => x.mode === 'gossip'); }, 60_000, 200), 'every worker went to gossip mode');
  const gossipAt = Date.now();
  t.ok(await until(() => views().every((x) => x.replica.done === TASKS), 120_000, 250), 'the workers finished every accepted task without the hub');
  t.comment(`gossip ${gossipAt - killedAt} ms after the kill; every task done in gossip ${Date.now() - killedAt} ms after it`);

  // Started again in host A's namespace (a pod started from elsewhere would be in that network).
  const start = a.netExec(['podman', 'pod', 'start', hubPod]);
  t.equal(start.code, 0, `the hub's pod starts again on host A (${start.stderr.trim().slice(-300)})`);
  t.equal(nsOf(hubC), netOf(a), 'in host A\'s namespace again');
  t.ok(await until(() => (status()?.tasks?.done ?? 0) === TASKS, 90_000, 500), 'the restarted hub has every task done (replayed and handed back)');
  t.ok(await until(() => views().every((x) => x.mode === 'star'), 60_000, 250), 'every worker is back in star mode');

  // The final read: the same tasks submitted again (idempotent by id) and waited for, from a worker's pod.
  const fin = cli(b, workerC(1), ['submit', '--file', '-', '--wait', '--json', '--timeout', '30000'], jsonl);
  const final: FinalTask[] = lastJson(fin.out)?.tasks ?? [];
  if (!final.length) t.comment(`${fin.out.slice(-500)} ${fin.err.slice(-500)}`);
  t.equal(final.length, TASKS, 'every task read back through the hub');
  const v = checker.check(final, { expect: (id) => `echo: task ${id}`, resultRecords: journalResults(hubState), mustFinish: true });
  t.comment(`lost=${v.lost} duplicated=${v.duplicated} changed=${v.changed} unexpected=${v.unexpected}${v.details.length ? `: ${v.details.join('; ')}` : ''}`);
  t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed, unexpected: v.unexpected }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0 }, 'nothing lost, nothing twice, nothing changed');

  for (const f of ['swarm-hub.yaml', 'swarm-w1.yaml']) t.equal(podman(['kube', 'down', path.join(out, f)]).code, 0, `kube down ${f}`);
  t.equal(podman(['pod', 'ps', '-q', '--filter', `name=${NAME}`]).out.trim(), '', 'no pods left');
});
