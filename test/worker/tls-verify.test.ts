// A worker's TLS link to the hub is always verified (a CA or a pinned fingerprint): one that could
// not be would hand the token to whoever answers on the hub's address.
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import t from 'tap';
import { swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { killGroup, startHub, type Proc } from '../helpers/failover.js';

const exitOf = (p: Proc, ms: number) => new Promise<number | null | 'running'>((resolve) => {
  if (p.child.exitCode !== null) { resolve(p.child.exitCode); return; }
  const timer = setTimeout(() => resolve('running'), ms);
  p.child.once('exit', (code) => { clearTimeout(timer); resolve(code); });
});
const fingerprint = (file: string) => new X509Certificate(fs.readFileSync(file)).fingerprint256;
const token = 'the-right-token-0123456789';

t.test('--tls without --tls-ca or --tls-pin is refused before anything is sent', async (t) => {
  const dir = tempDir(t);
  const certs = path.join(dir, 'certs');
  t.equal(swarm(['certs', '--dir', certs, '--host', 'hub=127.0.0.1']).code, 0);
  // Whoever listens on the hub's address: it counts what it is sent.
  let bytes = 0, links = 0;
  const impostor = tls.createServer({ cert: fs.readFileSync(path.join(certs, 'hub.crt')), key: fs.readFileSync(path.join(certs, 'hub.key')) }, (s) => { links++; s.on('data', (c: Buffer) => (bytes += c.length)); });
  await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
  t.teardown(() => impostor.close());
  const port = (impostor.address() as { port: number }).port;
  const w = swarmBg(['worker', '--hub', `127.0.0.1:${port}`, '--tls', '--id', 'w', '--driver', 'echo', '--state-dir', path.join(dir, 'w')], { env: { SWARM_TOKEN: token } });
  t.teardown(() => killGroup(w));
  t.equal(await exitOf(w, 30_000), 2, 'exits 2 (a configuration error), not retrying');
  t.match(w.output(), /SWARM_ERR_CONFIG: --tls needs --tls-ca .* or --tls-pin/, `it says why: ${w.output().trim().split('\n').pop()}`);
  t.equal(links, 0, 'no link was opened');
  t.equal(bytes, 0, 'no byte (no token) was sent');
});

t.test('a pinned fingerprint: the right one joins, a wrong one exits 7 and says so', async (t) => {
  const dir = tempDir(t);
  const certs = path.join(dir, 'certs');
  t.equal(swarm(['certs', '--dir', certs, '--host', 'hub=127.0.0.1', '--host', 'other=127.0.0.1']).code, 0);
  const state = path.join(dir, 'state');
  const hub = await startHub(state, ['--token', token, '--tls-cert', path.join(certs, 'hub.crt'), '--tls-key', path.join(certs, 'hub.key')]);
  t.teardown(() => killGroup(hub));
  const port = (JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { port: number; tls_fingerprint?: string }).port;
  t.equal((JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { tls_fingerprint?: string }).tls_fingerprint, fingerprint(path.join(certs, 'hub.crt')), 'hub.json pins the hub certificate for local workers');
  const worker = (id: string, pin: string) => swarmBg(['worker', '--hub', `127.0.0.1:${port}`, '--tls', '--tls-pin', pin, '--id', id, '--driver', 'echo', '--state-dir', path.join(dir, id)], { env: { SWARM_TOKEN: token } });
  const wrong = worker('wrong', fingerprint(path.join(certs, 'other.crt')));
  t.teardown(() => killGroup(wrong));
  t.equal(await exitOf(wrong, 30_000), 7, 'a wrong pin exits 7');
  t.match(wrong.output(), /SWARM_ERR_AUTH: the hub's certificate \(SHA-256 [0-9A-F]+\) is not the pinned one/, `it says why: ${wrong.output().trim().split('\n').pop()}`);
  const right = worker('right', fingerprint(path.join(certs, 'hub.crt')).toLowerCase());
  t.teardown(() => killGroup(right));
  t.ok(await until(() => swarm(['status', '--state-dir', state, '--json']).stdout.includes('"right"'), 20_000, 200), 'the right pin (any case, with colons) joins');
  // A local worker reads the pin from hub.json: no CA on one machine.
  const local = swarmBg(['worker', '--id', 'local', '--driver', 'echo', '--state-dir', state], { env: { SWARM_TOKEN: token } });
  t.teardown(() => killGroup(local));
  t.ok(await until(() => swarm(['status', '--state-dir', state, '--json']).stdout.includes('"local"'), 20_000, 200), 'a worker on the state dir joins by the pin in hub.json');
});
