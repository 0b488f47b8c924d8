import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, until } from '../helpers/cli.js';
import { expectExactlyOnce } from '../helpers/failover.js';
import { requireNamespaces } from '../helpers/netns.js';
import { HUB_PORT, hostsSwarm, taskFile } from '../helpers/hosts-swarm.js';

/**
 * Three hosts (network namespaces on a bridge): the hub on A, failover workers on B and C, TLS with a
 * CA made by `swarm certs`, a token. The operator's CLI reaches the control API over HTTPS.
 */

const logOf = (dir: string, prefix: string) => fs.readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith('.log'))
  .map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');

t.test('across hosts over TLS with a token: 300 tasks complete; status --hub-url lists workers with host addresses; a wrong CA or token is refused on both sides', async (t) => {
  if (!requireNamespaces(t)) return;
  const sw = hostsSwarm(t, { latencyMs: 5 });
  const { a, b, c } = sw;
  const hub = await sw.startHub();
  sw.startWorkers(b, 3);
  sw.startWorkers(c, 3);
  t.ok(await until(() => sw.status()?.workers?.length === 6, 60_000, 500), 'six workers on B and C joined the hub on A over TLS');
  const s = sw.status()!;
  t.ok(s.workers.filter((w) => w.id.startsWith('b-')).every((w) => w.addr === b.addr), `B's workers come from ${b.addr}`);
  t.ok(s.workers.filter((w) => w.id.startsWith('c-')).every((w) => w.addr === c.addr), `C's workers come from ${c.addr}`);
  const peers = s.failover?.workers ?? [];
  t.equal(peers.length, 6, 'every worker registered a peer port');
  t.ok(peers.every((p) => p.peerAddr.startsWith(`${p.id.startsWith('b-') ? b.addr : c.addr}:`)), `peers advertise their host's address, never loopback: ${peers.map((p) => p.peerAddr).join(' ')}`);

  const text = sw.remote(['status']);
  t.equal(text.code, 0, 'swarm status --hub-url from host A');
  t.match(text.stdout, new RegExp(`b-1 .*${b.addr.replace(/\./g, '\\.')}`), 'the text status shows each worker with its host address');

  const { file, ids } = taskFile(sw.dir, 300);
  const sub = sw.remote(['submit', '--file', file, '--wait', '--json', '--timeout', '120000'], 150_000);
  t.equal(sub.code, 0, `swarm submit --hub-url --wait: 300 tasks done (${sub.stderr.slice(-300)})`);
  expectExactlyOnce(t, sw.state.a!, ids);

  // A topology run and the run list, from host A through the control API.
  const spec = path.join(sw.dir, 'star.yaml');
  fs.writeFileSync(spec, 'name: star-hosts\ntopology: star\nseed: 1\ninputs:\n  items: [one, two, three, four]\nroles:\n  agent: {agents: 4, prompt: "{{item}}"}\n');
  const run = sw.remote(['run', spec, '--json'], 120_000);
  const view = (() => { try { return JSON.parse(run.stdout.trim().split('\n').pop()!) as { run: string; state: string; outcome?: { output: string } }; } catch { return undefined; } })();
  t.equal(view?.state, 'done', `swarm run --hub-url: the star run is done (${run.stderr.slice(-200)})`);
  t.match(view?.outcome?.output ?? '', /echo: one[\s\S]*echo: four/, 'with every item\'s answer');
  t.match(sw.remote(['runs', 'ls']).stdout, new RegExp(`${view?.run ?? 'no run'}\\s+star\\s+done`), 'swarm runs ls --hub-url lists it');

  // A CLI without the CA does not trust the control API: a clear refusal, not a hang.
  const noCa = a.swarm(['status', '--hub-url', sw.hubUrl, '--token', sw.token], { timeoutMs: 20_000, env: { SWARM_TLS_CA: '' } });
  t.not(noCa.code, 0, 'status without the CA is refused');
  t.match(noCa.stderr, /not trusted.*--tls-ca/, `the CLI says why: ${noCa.stderr.trim()}`);
  const badToken = a.swarm(['status', '--hub-url', sw.hubUrl, '--token', 'wrong-token-123', '--tls-ca', path.join(sw.certs, 'ca.crt')], { timeoutMs: 20_000 });
  t.not(badToken.code, 0, 'status with a wrong token is refused');
  t.match(badToken.stderr, /SWARM_ERR_AUTH/, `with the auth code: ${badToken.stderr.trim()}`);

  // A worker that trusts another CA, and one with the wrong token: refused, and both sides log why.
  const other = path.join(sw.dir, 'other-certs');
  t.equal(spawnSync(process.execPath, [CLI, 'certs', '--dir', other, '--host', `c=${c.addr}`]).status, 0, 'a second, unrelated CA');
  const wrongCa = c.swarmBg(['worker', '--hub', `${a.addr}:${HUB_PORT}`, '--tls-ca', path.join(other, 'ca.crt'), '--id', 'x-ca', '--driver', 'echo',
    '--state-dir', sw.state.c!, '--tls-cert', path.join(other, 'c.crt'), '--tls-key', path.join(other, 'c.key'), '--log-file', path.join(sw.state.c!, 'x-ca.log')], { env: { SWARM_TOKEN: sw.token } });
  const wrongTok = c.swarmBg(['worker', '--hub', `${a.addr}:${HUB_PORT}`, '--tls-ca', path.join(sw.certs, 'ca.crt'), '--id', 'x-tok', '--driver', 'echo',
    '--state-dir', sw.state.c!, '--tls-cert', path.join(sw.certs, 'c.crt'), '--tls-key', path.join(sw.certs, 'c.key'), '--log-file', path.join(sw.state.c!, 'x-tok.log')], { env: { SWARM_TOKEN: 'wrong-token-123' } });
  // A refusal is not retried: each exits 7 (SWARM_ERR_AUTH) and says why.
  const exited = (p: typeof wrongCa) => until(() => p.child.exitCode !== null, 30_000, 100).then(() => p.child.exitCode);
  t.equal(await exited(wrongCa), 7, 'the worker with another CA exits 7');
  t.match(wrongCa.output() + logOf(sw.state.c!, 'x-ca'), /SWARM_ERR_AUTH: the hub's certificate is not trusted/, 'and says the hub\'s certificate is not trusted');
  t.equal(await exited(wrongTok), 7, 'the worker with a wrong token exits 7');
  t.match(wrongTok.output() + logOf(sw.state.c!, 'x-tok'), /SWARM_ERR_AUTH: .*wrong or missing token/, 'and says SWARM_ERR_AUTH: wrong or missing token');
  t.ok(await until(() => /refused in the TLS handshake/.test(logOf(sw.state.a!, 'hub-')) && /bad token/.test(logOf(sw.state.a!, 'hub-')), 20_000, 250),
    'the hub logs both refusals: the TLS handshake and the bad token');
  t.equal(sw.status()?.workers?.length, 6, 'neither joined');
  for (const p of [wrongCa, wrongTok]) try { process.kill(-p.child.pid!, 'SIGKILL'); } catch { /* gone */ }

  // The operator stops the remote swarm's hub.
  t.equal(sw.remote(['down']).code, 0, 'swarm down --hub-url');
  t.ok(await until(() => hub.child.exitCode !== null, 30_000, 200), 'the hub on A exits');
});
