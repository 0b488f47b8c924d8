// Every refusal names its real cause, and the hub's log says who was refused (address:port).
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { killGroup, startHub, type Proc } from '../helpers/failover.js';

const exitOf = (p: Proc, ms: number) => new Promise<number | null | 'running'>((resolve) => {
  if (p.child.exitCode !== null) { resolve(p.child.exitCode); return; }
  const timer = setTimeout(() => resolve('running'), ms);
  p.child.once('exit', (code) => { clearTimeout(timer); resolve(code); });
});
const hubLog = (dir: string) => fs.readdirSync(dir).filter((f) => f.startsWith('hub-') && f.endsWith('.log')).map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');
const refusals = (dir: string) => hubLog(dir).split('\n').filter((l) => l.includes('refused')).map((l) => JSON.parse(l) as { remote?: string; err?: string; msg: string });
const token = 'the-right-token-0123456789';

t.test('refusals by a mutual-TLS hub: each names its cause; the hub logs the remote address of every one', async (t) => {
  const dir = tempDir(t);
  const certs = path.join(dir, 'certs'), other = path.join(dir, 'other');
  t.equal(swarm(['certs', '--dir', certs, '--host', 'hub=127.0.0.1', '--host', 'w=127.0.0.1']).code, 0);
  t.equal(swarm(['certs', '--dir', other, '--host', 'w=127.0.0.1']).code, 0);
  const state = path.join(dir, 'state');
  const hub = await startHub(state, ['--token', token, '--tls-cert', path.join(certs, 'hub.crt'), '--tls-key', path.join(certs, 'hub.key'), '--tls-ca', path.join(certs, 'ca.crt')]);
  t.teardown(() => killGroup(hub));
  const h = JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { port: number; control: { port: number } };
  const worker = (id: string, extra: string[]) => swarmBg(['worker', '--hub', `127.0.0.1:${h.port}`, '--id', id, '--driver', 'echo', '--state-dir', path.join(dir, id), ...extra], { env: { SWARM_TOKEN: token } });

  const plain = worker('plain', []);
  t.teardown(() => killGroup(plain));
  t.equal(await exitOf(plain, 30_000), 7, 'a plain-TCP worker against a TLS hub exits 7 (not retrying forever)');
  t.match(plain.output(), /SWARM_ERR_AUTH: the hub at 127\.0\.0\.1:\d+ speaks TLS and this worker connected in plain TCP: give --tls with --tls-ca/, `it says why: ${plain.output().trim().split('\n').pop()}`);

  const nocert = worker('nocert', ['--tls-ca', path.join(certs, 'ca.crt')]);
  t.teardown(() => killGroup(nocert));
  t.equal(await exitOf(nocert, 30_000), 7, 'a worker presenting no certificate exits 7');
  t.match(nocert.output(), /no client certificate presented/, `it says so: ${nocert.output().trim().split('\n').pop()}`);
  t.notMatch(nocert.output(), /UNABLE_TO_GET_ISSUER_CERT/, 'not as an issuer problem');

  const distrust = worker('distrust', ['--tls-ca', path.join(other, 'ca.crt'), '--tls-cert', path.join(certs, 'w.crt'), '--tls-key', path.join(certs, 'w.key')]);
  t.teardown(() => killGroup(distrust));
  t.equal(await exitOf(distrust, 30_000), 7, 'a worker that does not trust the hub exits 7');

  // A worker may be refused more than once before it exits (a link that closes before it reads the
  // ERROR looks like a cut and is retried),
  // so the log is awaited for each cause, not for a count.
  const causes = [/plain TCP, not TLS/, /no client certificate presented/, /does not trust this certificate/];
  t.ok(await until(() => causes.every((c) => refusals(state).some((r) => c.test(r.err ?? ''))), 10_000, 100), `the hub logs the three refusals: ${JSON.stringify(refusals(state))}`);
  const logged = refusals(state);
  t.ok(logged.every((r) => /^127\.0\.0\.1:\d+$/.test(r.remote ?? '')), `each with its remote address and port: ${logged.map((r) => r.remote).join(' ')}`);
  t.ok(logged.some((r) => /plain TCP, not TLS/.test(r.err ?? '')), 'the plain link: named as such');
  t.ok(logged.some((r) => /no client certificate presented/.test(r.err ?? '')), 'the missing certificate: named as such');
  t.ok(logged.some((r) => /does not trust this certificate/.test(r.err ?? '')), 'the distrusting worker: named as such');

  // The CLI given the worker port for the control API.
  const cli = swarm(['status', '--hub-url', `https://127.0.0.1:${h.port}`, '--tls-ca', path.join(certs, 'ca.crt'), '--token', token], { timeoutMs: 20_000 });
  t.equal(cli.code, 2, 'the CLI pointed at the worker port exits 2');
  t.match(cli.stderr, /does not answer in HTTP .*worker port, not its control API; --hub-url takes the control port/, `it says why: ${cli.stderr.trim()}`);
  t.notMatch(cli.stderr, /Parse Error/, 'not a parser error');
});
