// `swarm certs` and the remote-CLI options, without namespaces: what the files are and what is refused.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { swarm, tempDir } from '../helpers/cli.js';
import { remoteTarget } from '../../cli/http.js';
import { parseCertHost, subjectAltName } from '../../cli/commands/certs.js';

t.test('swarm certs: a CA, host certificates it signed with the hosts\' addresses, a token; keys 0600; reused on a second run', async (t) => {
  const dir = path.join(tempDir(t), 'certs');
  const r = swarm(['certs', '--dir', dir, '--host', 'hub=10.1.2.3,hub.lan', '--host', 'w1=10.1.2.4', '--json']);
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout).made.sort(), ['ca.crt', 'ca.key', 'hub.crt', 'hub.key', 'token', 'w1.crt', 'w1.key'].sort());
  for (const k of ['ca.key', 'hub.key', 'w1.key', 'token']) t.equal(fs.statSync(path.join(dir, k)).mode & 0o777, 0o600, `${k} is 0600`);
  const verify = spawnSync('openssl', ['verify', '-CAfile', path.join(dir, 'ca.crt'), path.join(dir, 'hub.crt')], { encoding: 'utf8' });
  t.match(verify.stdout, /OK/, 'the host certificate verifies against the CA');
  const text = spawnSync('openssl', ['x509', '-in', path.join(dir, 'hub.crt'), '-noout', '-ext', 'subjectAltName,extendedKeyUsage'], { encoding: 'utf8' }).stdout;
  t.match(text, /IP Address:10\.1\.2\.3/, 'its address');
  t.match(text, /DNS:hub\.lan/, 'its DNS name');
  t.match(text, /TLS Web Server Authentication, TLS Web Client Authentication/, 'server and client use (hub port, peer port, mutual TLS)');
  const again = swarm(['certs', '--dir', dir, '--host', 'hub=10.1.2.3', '--json']);
  t.same(JSON.parse(again.stdout).made, [], 'a second run keeps what exists');
  t.equal(swarm(['certs', '--dir', dir, '--host', 'bad/name=1.2.3.4']).code, 2, 'a bad host name is a usage error');
  t.equal(subjectAltName(parseCertHost('a=::1,x.y')[0]!), 'DNS:a,IP:::1,DNS:x.y');
});

t.test('--hub-url: https to a remote control API; plain http only to loopback; the env works too', async (t) => {
  t.same(remoteTarget({ hubUrl: 'https://10.0.0.1:7071', token: 'tok' }), { control: { host: '10.0.0.1', port: 7071, tls: true, ca: undefined }, token: 'tok' });
  t.equal(remoteTarget({ hubUrl: 'http://127.0.0.1:7071' })?.control.tls, false, 'plain http to loopback');
  t.throws(() => remoteTarget({ hubUrl: 'http://10.0.0.1:7071', token: 'tok' }), /over https/, 'plain http off loopback is refused (the token would cross in clear)');
  t.throws(() => remoteTarget({ hubUrl: 'not a url' }), /not a URL/);
  t.throws(() => remoteTarget({ hubUrl: 'https://10.0.0.1:7071', tlsCa: '/nonexistent/ca.crt' }), /--tls-ca/);
  const saved = { ...process.env };
  t.teardown(() => { process.env = saved; });
  process.env.SWARM_HUB_URL = 'https://[::1]:9000';
  process.env.SWARM_TOKEN = 'from-env';
  t.same(remoteTarget({}), { control: { host: '::1', port: 9000, tls: true, ca: undefined }, token: 'from-env' }, 'SWARM_HUB_URL and SWARM_TOKEN');
  delete process.env.SWARM_HUB_URL;
  t.equal(remoteTarget({}), undefined, 'no URL: the state directory\'s hub');
  const r = swarm(['status', '--hub-url', 'https://127.0.0.1:1', '--token', 'x'], { env: { SWARM_HUB_URL: '' } });
  t.equal(r.code, 3, 'nothing listening: exit 3 (no swarm)');
  t.match(r.stderr, /cannot reach the hub's control API at 127\.0\.0\.1:1/);
});

t.test('the control API binds loopback unless given an address, a token and TLS', async (t) => {
  const { hubConfig } = await import('../../hub/index.js');
  const token = 'a-long-random-token-0123456789abcdef';
  t.equal(hubConfig({ token }).controlHost, '127.0.0.1', 'loopback by default');
  t.throws(() => hubConfig({ controlHost: '10.0.0.1' }), { code: 'SWARM_ERR_INSECURE_BIND' }, 'an address without a token is refused');
  t.throws(() => hubConfig({ controlHost: '10.0.0.1', token }), { code: 'SWARM_ERR_INSECURE_BIND' }, 'an address with a token but no TLS is refused (the token would cross in clear)');
  t.equal(hubConfig({ controlHost: '10.0.0.1', token, tlsCert: '/c.crt', tlsKey: '/c.key' }).controlHost, '10.0.0.1', 'an address with a token and TLS is served');
});
