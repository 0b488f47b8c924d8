// A worker the hub refuses (a wrong token, a certificate one side does not accept) exits with
// SWARM_ERR_AUTH and exit code 7 instead of retrying forever, and the hub logs the refusal; a hub
// that is merely not there yet is retried. Loopback only (no namespaces needed); the same refusals
// across hosts are in test/hosts/hosts-tls.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { hubFile, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { freePorts, killGroup, startHub, type Proc } from '../helpers/failover.js';

const exitOf = (p: Proc, ms: number) => new Promise<number | null | 'running'>((resolve) => {
  if (p.child.exitCode !== null) { resolve(p.child.exitCode); return; }
  const timer = setTimeout(() => resolve('running'), ms);
  p.child.once('exit', (code) => { clearTimeout(timer); resolve(code); });
});
const hubLog = (dir: string) => fs.readdirSync(dir).filter((f) => f.startsWith('hub-') && f.endsWith('.log')).map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');

t.test('a wrong token: the worker exits 7 with SWARM_ERR_AUTH; the hub logs the bad token; a right token joins', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const hub = await startHub(state, ['--token', 'the-right-token-0123456789']);
  t.teardown(() => killGroup(hub));
  const port = hubFile(state)!.port; // bound at 0 by the hub, read back
  const worker = (token: string, id: string) => swarmBg(['worker', '--hub', `127.0.0.1:${port}`, '--id', id, '--driver', 'echo', '--state-dir', path.join(dir, id)], { env: { SWARM_TOKEN: token } });
  const wrong = worker('a-wrong-token-0123456789', 'wrong');
  t.teardown(() => killGroup(wrong));
  t.equal(await exitOf(wrong, 30_000), 7, 'the refused worker exits with code 7 (not retrying forever)');
  t.match(wrong.output(), /swarm: SWARM_ERR_AUTH: .*wrong or missing token/, `it says why: ${wrong.output().trim().split('\n').pop()}`);
  t.ok(await until(() => /handshake refused: bad token/.test(hubLog(state)), 10_000, 100), 'the hub logs the refusal');
  const right = worker('the-right-token-0123456789', 'right');
  t.teardown(() => killGroup(right));
  t.ok(await until(() => swarm(['status', '--state-dir', state, '--json']).stdout.includes('"right"'), 20_000, 200), 'the right token joins');
  t.equal(right.child.exitCode, null, 'and stays');
});

t.test('a hub not there yet is retried, not refused', async (t) => {
  const dir = tempDir(t);
  // The one port here that must be named before anything listens on it: found free, then released.
  const [port] = await freePorts(1);
  const w = swarmBg(['worker', '--hub', `127.0.0.1:${port}`, '--id', 'early', '--driver', 'echo', '--state-dir', path.join(dir, 'early')], { env: { SWARM_TOKEN: 'the-right-token-0123456789' } });
  t.teardown(() => killGroup(w));
  t.equal(await exitOf(w, 1000), 'running', 'still retrying after 1 s with nothing listening (and it must still be there to join below)');
  const state = path.join(dir, 'state');
  const hub = await startHub(state, ['--port', String(port), '--token', 'the-right-token-0123456789']);
  t.teardown(() => killGroup(hub));
  t.ok(await until(() => swarm(['status', '--state-dir', state, '--json']).stdout.includes('"early"'), 30_000, 200), 'it joins once the hub is up');
});

t.test('mutual TLS: a worker that does not trust the hub, and one whose certificate the hub does not accept, exit 7; the hub logs the TLS refusal', async (t) => {
  const dir = tempDir(t);
  const certs = path.join(dir, 'certs'), other = path.join(dir, 'other');
  t.equal(swarm(['certs', '--dir', certs, '--host', 'hub=127.0.0.1', '--host', 'w=127.0.0.1']).code, 0, 'a CA and certificates');
  t.equal(swarm(['certs', '--dir', other, '--host', 'w=127.0.0.1']).code, 0, 'an unrelated CA');
  const state = path.join(dir, 'state');
  const token = 'the-right-token-0123456789';
  const hub = await startHub(state, ['--token', token, '--tls-cert', path.join(certs, 'hub.crt'), '--tls-key', path.join(certs, 'hub.key'), '--tls-ca', path.join(certs, 'ca.crt')]);
  t.teardown(() => killGroup(hub));
  const port = hubFile(state)!.port;
  const worker = (id: string, ca: string, own: string) => swarmBg(['worker', '--hub', `127.0.0.1:${port}`, '--id', id, '--driver', 'echo', '--state-dir', path.join(dir, id),
    '--tls-ca', path.join(ca, 'ca.crt'), '--tls-cert', path.join(own, 'w.crt'), '--tls-key', path.join(own, 'w.key')], { env: { SWARM_TOKEN: token } });

  const distrust = worker('distrust', other, certs);
  t.teardown(() => killGroup(distrust));
  t.equal(await exitOf(distrust, 30_000), 7, 'a worker trusting another CA exits 7');
  t.match(distrust.output(), /SWARM_ERR_AUTH: the hub's certificate is not trusted.*--tls-ca/, `it says why: ${distrust.output().trim().split('\n').pop()}`);

  const foreign = worker('foreign', certs, other);
  t.teardown(() => killGroup(foreign));
  t.equal(await exitOf(foreign, 30_000), 7, 'a worker presenting a certificate of another CA exits 7');
  t.match(foreign.output(), /SWARM_ERR_AUTH: .*certificate is not accepted/, `it says why: ${foreign.output().trim().split('\n').pop()}`);
  t.ok(await until(() => (hubLog(state).match(/refused in the TLS handshake/g) ?? []).length >= 2, 10_000, 100), 'the hub logs both TLS refusals');

  const good = worker('good', certs, certs);
  t.teardown(() => killGroup(good));
  t.ok(await until(() => swarm(['status', '--state-dir', state, '--json']).stdout.includes('"good"'), 20_000, 200), 'the right CA and certificate join');
});
