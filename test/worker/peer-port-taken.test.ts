import t from 'tap';
import net from 'node:net';
import { alive, api, hubFile, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';

/**
 * A worker whose failover peer port cannot be opened (the port asked for is taken; with no local
 * port left the bind fails the same way) crashed the whole worker process with an unhandled
 * EADDRINUSE. It runs on without failover, says SWARM_ERR_PEER_PORT and why, and its tasks are done.
 */

interface Status { workers: { id: string; failover_error?: { code: string; msg: string } }[]; tasks: { queued: number; leased: number; done: number; failed: number } }

t.test('a taken peer port: the worker runs on without failover and says why (SWARM_ERR_PEER_PORT)', async (t) => {
  const state = tempDir(t);
  const taken = net.createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => { taken.close(); });
  const port = (taken.address() as net.AddressInfo).port;
  const hub = swarmBg(['hub', '--state-dir', state]);
  t.teardown(() => { try { process.kill(-hub.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => hubFile(state)?.pid === hub.child.pid, 60_000), 'hub up');
  const worker = swarmBg(['worker', '--id', 'pp', '--state-dir', state, '--driver', 'echo', '--failover', '--peer-port', String(port)]);
  t.teardown(() => {
    try { process.kill(-worker.child.pid!, 'SIGKILL'); } catch { /* gone */ }
    swarm(['down', '--state-dir', state]);
  });
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status').catch(() => undefined))?.workers.length === 1, 60_000), `the worker joined (${worker.output().slice(-400)})`);
  const N = 20;
  const acc = await api<{ accepted: unknown[] }>(state, 'POST', '/tasks', { tasks: Array.from({ length: N }, (_, i) => ({ id: `p-${i}`, prompt: `n${i}` })) });
  t.equal(acc.accepted.length, N, 'accepted');
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).tasks.done >= N, 30_000), 'every task done by that worker');
  t.ok(alive(worker.child.pid!), 'the worker process is alive');
  t.match(worker.output(), /SWARM_ERR_PEER_PORT/, 'it names the error code');
  t.match(worker.output(), new RegExp(`port ${port} is taken`), 'and the cause');
  t.notMatch(worker.output(), /listen EADDRINUSE|Node.js v/, 'no unhandled error');
  // Not only in its log: the hub's status names the worker, the code and the cause.
  const w = (await api<Status>(state, 'GET', '/status')).workers.find((x) => x.id === 'pp');
  t.equal(w?.failover_error?.code, 'SWARM_ERR_PEER_PORT', 'status --json names the code for that worker');
  t.match(w?.failover_error?.msg, new RegExp(`port ${port} is taken`), 'and the cause');
  const text = swarm(['status', '--state-dir', state]);
  t.match(text.stdout, new RegExp(`failover OFF for 1 worker\\(s\\) \\(star only\\): pp: SWARM_ERR_PEER_PORT: .*port ${port} is taken`), 'swarm status says so');
});
