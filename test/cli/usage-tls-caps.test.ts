// Certificate files and capabilities as a careless user gives them. Before: a directory or a missing
// file as --tls-cert started the swarm and the hub then stopped as a bug (SWARM_ERR_INTERNAL, "EISDIR");
// a device was read whole until the hub died (std::bad_alloc); 100 --caps were taken, every worker's
// HANDSHAKE was refused (caps: at most 64) and `up` waited its whole ready timeout at 0/N.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { pidsMentioning, swarm, tempDir } from '../helpers/cli.js';

t.test('--tls-cert/--tls-key/--tls-ca that are not small readable files, and --caps past the protocol\'s bounds: usage errors before anything starts', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  const huge = path.join(root, 'huge.pem');
  fs.writeFileSync(huge, Buffer.alloc(5 * 1024 * 1024, 'A'));
  const cases: [string[], RegExp][] = [
    [['up', '--tls-cert', root, '--tls-key', root], /option '--tls-cert <file>' argument .* is invalid\. .* is not a file/],
    [['up', '--tls-cert', path.join(root, 'nope.crt'), '--tls-key', path.join(root, 'nope.key')], /no such file/],
    [['up', '--tls-cert', huge, '--tls-key', huge], /is 5242880 bytes; a PEM certificate, key or CA bundle is far smaller/],
    [['hub', '--tls-ca', root], /option '--tls-ca <file>' argument .* is not a file/],
    [['worker', '--hub', '127.0.0.1:1', '--tls', '--tls-ca', root], /option '--tls-ca <file>' argument .* is not a file/],
    [['status', '--hub-url', 'https://127.0.0.1:1', '--tls-ca', root], /SWARM_ERR_CONFIG: --tls-ca: .* is not a file/],
    [['up', '--caps', Array.from({ length: 100 }, (_, i) => `c${i}`).join(',')], /100 capabilities; a worker has at most 64/],
    [['up', '--caps', 'x'.repeat(300)], /a capability has at most 256 characters \(one has 300\)/],
    [['worker', '--hub', '127.0.0.1:1', '--caps', Array.from({ length: 65 }, (_, i) => `c${i}`).join(',')], /65 capabilities/],
    // A token past the HANDSHAKE's bound: every join was refused (BAD_PAYLOAD) and the worker retried forever.
    [['worker', '--hub', '127.0.0.1:1', '--driver', 'echo', '--token', 't'.repeat(5000)], /the token given .* is 5000 characters long; a token has at most 4096/],
    [['worker', '--hub', '127.0.0.1:1', '--driver', 'echo', '--token', 'ok-token', '--failover', '--peer-token', 'p'.repeat(5000)], /the peer token .* is 5000 characters long/],
  ];
  for (const [args, says] of cases) {
    const up = args[0] === 'up' ? ['--agents', '1', '--driver', 'echo', '--detach', '--ready-timeout', '5000'] : [];
    const r = swarm([...args, ...up, '--state-dir', dir], { timeoutMs: 30_000 });
    const what = args.map((a) => (a.length > 40 ? `${a.slice(0, 40)}…` : a)).join(' ');
    t.equal(r.code, 2, `${what}: exit 2 (${r.stderr.split('\n')[0]!.slice(0, 200)})`);
    t.match(r.stderr, says, `${what}: says why`);
    t.notMatch(r.stderr, /INTERNAL|a bug/, `${what}: not as a bug`);
    t.notOk(fs.existsSync(path.join(dir, 'hub.json')), `${what}: no hub started`);
    t.same(pidsMentioning(dir), [], `${what}: no process left`);
  }
  const ok = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--caps', Array.from({ length: 64 }, (_, i) => `c${i}`).join(','), '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(ok.code, 0, `64 capabilities: a swarm runs (${ok.stderr.trim()})`);
  t.equal(swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 }).code, 0);
});

t.test('swarm worker: an id past 128 characters (given, in --ids, or made by --count) and a role past 256 are usage errors; the hub refused them and the worker retried forever', async (t) => {
  const root = tempDir(t);
  const long = 'x'.repeat(300);
  const cases: [string[], RegExp][] = [
    [['--id', long], /a worker id has at most 128 characters \(x+… has 300\)/],
    [['--ids', `a,${long}`], /a worker id has at most 128 characters/],
    [['--id', 'y'.repeat(126), '--count', '12'], /has 129, with its -N/],
    [['--id', 'ok', '--role', long], /--role has at most 256 characters \(this one has 300\)/],
  ];
  for (const [args, says] of cases) {
    const r = swarm(['worker', '--hub', '127.0.0.1:1', '--driver', 'echo', ...args, '--state-dir', path.join(root, 'w')], { timeoutMs: 20_000 });
    const what = args.map((a) => (a.length > 40 ? `${a.slice(0, 40)}…` : a)).join(' ');
    t.equal(r.code, 2, `${what}: exit 2 (${r.stderr.split('\n')[0]!.slice(0, 200)})`);
    t.match(r.stderr, says, `${what}: says why`);
  }
});
