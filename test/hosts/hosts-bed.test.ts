import t from 'tap';
import { spawnSync } from 'node:child_process';
import { makeHosts, requireNamespaces } from '../helpers/netns.js';

/** The hosts test bed itself: addresses, reachability, partition and heal, kill-all, cleanup. */

// A one-shot TCP probe run inside a host: connect to addr:port, print "ok" or the error code.
const probe = (addr: string, port: number) => [process.execPath, '-e',
  `const s=require('net').connect({host:'${addr}',port:${port}},()=>{console.log('ok');process.exit(0)});` +
  `s.on('error',e=>{console.log(e.code);process.exit(1)});setTimeout(()=>{console.log('timeout');process.exit(2)},1500)`];
const server = (addr: string, port: number) => [process.execPath, '-e',
  `require('net').createServer(s=>s.end()).listen(${port},'${addr}',()=>console.log('listening'));setTimeout(()=>{},60000)`];

t.test('hosts: own addresses, reachable from each other, partitioned and healed, killed, removed', async (t) => {
  if (!requireNamespaces(t)) return;
  const bed = makeHosts(t, ['a', 'b', 'c']);
  const [a, b, c] = bed.hosts as [typeof bed.hosts[0], typeof bed.hosts[0], typeof bed.hosts[0]];
  t.same(bed.hosts.map((h) => h.addr), ['10.231.0.1', '10.231.0.2', '10.231.0.3'], 'each host has its own address');
  const lo = a.exec(['ip', '-o', 'addr', 'show', 'lo']);
  t.match(lo.stdout, /127\.0\.0\.1/, 'loopback is up inside a host');

  const { spawn } = await import('node:child_process');
  const srv = spawn('ip', ['netns', 'exec', a.ns, ...server(a.addr, 7001)], { stdio: ['ignore', 'pipe', 'ignore'] });
  await new Promise<void>((r) => srv.stdout!.once('data', () => r()));
  t.equal(b.exec(probe(a.addr, 7001)).stdout.trim(), 'ok', 'b reaches a across the bridge');
  t.equal(c.exec(probe(a.addr, 7001)).stdout.trim(), 'ok', 'c reaches a across the bridge');
  t.not(b.exec(probe('127.0.0.1', 7001)).stdout.trim(), 'ok', "b's loopback is its own, not a's");

  c.partition();
  t.not(c.exec(probe(a.addr, 7001)).stdout.trim(), 'ok', 'partitioned c does not reach a');
  t.equal(b.exec(probe(a.addr, 7001)).stdout.trim(), 'ok', 'b still does');
  c.heal();
  let healed = false;
  for (let i = 0; i < 20 && !healed; i++) healed = c.exec(probe(a.addr, 7001)).stdout.trim() === 'ok';
  t.ok(healed, 'healed c reaches a again');

  t.ok(a.pids().includes(srv.pid!), "the server is one of a's processes");
  await a.killAll();
  t.same(a.pids(), [], 'kill-all leaves no process in a');
  t.not(b.exec(probe(a.addr, 7001)).stdout.trim(), 'ok', "a's server is gone");

  await bed.cleanup();
  const left = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
  t.notOk(bed.hosts.some((h) => left.includes(h.ns)), 'every namespace (and with it every veth and the bridge) is removed');
});
