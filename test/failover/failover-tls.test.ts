import t from 'tap';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, hubStatus, submit, tally } from '../helpers/failover.js';
import { TcpTransport } from '../../worker/gossip/transport.js';
import { Membership } from '../../worker/gossip/membership.js';

/**
 * Peer links follow the hub's TLS rules: with a certificate, the peer port speaks TLS, and a
 * swarm whose hub runs with --tls-cert/--tls-key gives its workers' peer ports the same certificate.
 */

/** A self-signed certificate for localhost and 127.0.0.1 (openssl, no network). */
function selfSigned(dir: string, name: string): { cert: string; key: string } {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  return { cert, key };
}

const fast = { probeIntervalMs: 300, probeTimeoutMs: 120, gossipIntervalMs: 100, pushPullIntervalMs: 3000, reconnectIntervalMs: 500, suspicionMult: 3 };

t.test('gossip over TLS: verified peers converge; a plain-TCP peer is not admitted', async (t) => {
  const dir = tempDir(t);
  const fs = await import('node:fs');
  const a = selfSigned(dir, 'a');
  const tlsA = { cert: fs.readFileSync(a.cert), key: fs.readFileSync(a.key), ca: fs.readFileSync(a.cert) };
  const nodes: { m: Membership; tr: TcpTransport }[] = [];
  t.teardown(async () => { for (const n of nodes) { n.m.stop(); await n.tr.close(); } });
  const make = async (id: string, tls?: NonNullable<ConstructorParameters<typeof TcpTransport>[0]>['tls']) => {
    const tr = new TcpTransport({ tls });
    await tr.listen();
    const m = new Membership({ id, transport: tr, config: fast });
    nodes.push({ m, tr });
    return { m, tr };
  };
  const good: { m: Membership; tr: TcpTransport }[] = [];
  for (let i = 0; i < 5; i++) good.push(await make(`w-${i}`, tlsA));
  for (const n of good) { n.m.start(); if (n !== good[0]) n.m.join(good[0]!.tr.addr); }
  t.ok(await until(() => good.every((n) => n.m.live().length === 5), 20_000), 'five TLS members see each other live');

  // Each plain-TCP connection a TLS member refuses shows as a failed handshake on its server.
  let refused = 0;
  for (const n of good) (n.tr as unknown as { server: import('node:tls').Server }).server.on('tlsClientError', () => { refused++; });
  const plain = await make('x-plain');
  plain.m.start();
  plain.m.join(good[0]!.tr.addr);
  // Not a fixed wait: until the plain peer's join has been refused several times (its retries).
  t.ok(await until(() => refused >= 3, 20_000), `the plain-TCP peer's connections were refused (${refused} handshakes)`);
  t.ok(good.every((n) => n.m.live().length === 5 && !n.m.live().includes('x-plain')), 'no TLS member admits the plain-TCP peer');
  t.equal(plain.m.live().length, 1, 'the plain-TCP peer hears from no one');
});

t.test('swarm up --failover with --tls-cert/--tls-key: peer ports use TLS; the hub killed, the workers finish by gossip', async (t) => {
  const dir = tempDir(t);
  const { cert, key } = selfSigned(dir, 'hub');
  const N = 4;
  const TASKS = 60;
  const up = swarm(['up', '--agents', String(N), '--driver', 'echo', '--driver-opt', 'latency_ms=50', '--failover', '--detach',
    '--tls-cert', cert, '--tls-key', key, '--state-dir', path.join(dir, 'state')]);
  t.equal(up.code, 0, 'swarm up with TLS and failover is ready');
  const sd = path.join(dir, 'state');
  t.ok(await until(async () => (await hubStatus(sd))?.failover?.workers.length === N, 30_000, 100), 'all workers joined with a peer port');
  t.ok(await until(() => agents(sd).length === N, 20_000, 50), 'every worker wrote its failover status');
  // A plain-TCP hello to a peer port is not answered: the port speaks TLS.
  const addr = agents(sd)[0]!.peer_addr;
  const net = await import('node:net');
  const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
  const firstByte = await new Promise<number | undefined>((resolve) => {
    const s = net.connect({ host, port }, () => s.write('\x16\x03\x01\x00\x05hello'));
    s.once('data', (d: Buffer) => { resolve(d[0]); s.destroy(); });
    s.once('error', () => resolve(undefined));
    s.once('close', () => resolve(undefined));
    setTimeout(() => { resolve(undefined); s.destroy(); }, 3000);
  });
  t.ok(firstByte === undefined || firstByte === 0x15 || firstByte === 0x16, `the peer port answers as TLS (first byte ${firstByte})`);
  const ids = await submit(sd, TASKS);
  t.ok(await until(() => agents(sd).some((a) => a.replica.done >= 4), 20_000, 20), 'the run is under way');
  process.kill(hubFile(sd)!.pid, 'SIGKILL');
  t.ok(await allInMode(sd, 'gossip', N, 30_000), 'every worker went to gossip mode (peers heard each other over TLS)');
  t.ok(await until(() => agents(sd).some((a) => a.coordinating && a.replica.done === TASKS), 60_000, 100), 'the acting coordinator has every task done: assignments and results went over TLS peer links');
  const r = tally(sd, ids);
  t.comment(`recorded by the hub before the kill: ${TASKS - r.lost}`);
  t.equal(r.duplicated, 0, 'nothing recorded twice');
});
