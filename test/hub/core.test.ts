import t from 'tap';
import net from 'node:net';
import { encodeLine, newId } from '../../protocol/index.js';
import { hubConfig } from '../../hub/index.js';
import { startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';

t.test('tasks submitted to a hub are answered by echo workers, each recorded once', async (t) => {
  const { hub, addr, stop } = await startHub();
  const pool = startPool(addr, 3);
  t.teardown(async () => { await pool.stop(); await stop(); });
  t.ok(await waitWorkers(hub, 3), 'three workers joined');
  const specs = Array.from({ length: 300 }, (_, i) => ({ prompt: `task ${i}`, id: `t-${i}` }));
  const acc = await hub.submit(specs);
  t.equal(acc.filter((a) => a.duplicate).length, 0);
  t.ok(await waitTasks(hub, 300), 'all finished');
  const c = hub.store.queue.counts();
  t.same(c, { queued: 0, leased: 0, done: 300, failed: 0 });
  for (let i = 0; i < 300; i++) t.equal(hub.store.queue.get(`t-${i}`)?.result?.text, `echo: task ${i}`, '', { diagnostic: false });
  const workers = new Set(specs.map((s) => hub.store.queue.get(s.id)!.result!.worker));
  t.ok(workers.size >= 2, `work spread over ${workers.size} workers`);
  t.equal(hub.metrics.duplicateResults, 0, 'no duplicate results');
});

t.test('submitting the same id twice does not run the task twice', async (t) => {
  const { hub, addr, stop } = await startHub();
  const pool = startPool(addr, 1);
  t.teardown(async () => { await pool.stop(); await stop(); });
  await waitWorkers(hub, 1);
  const [a] = await hub.submit([{ prompt: 'once', id: 'job-1' }]);
  t.equal(a!.duplicate, false);
  await waitTasks(hub, 1);
  const [b] = await hub.submit([{ prompt: 'once', id: 'job-1' }]);
  t.equal(b!.duplicate, true, 'second submit is a duplicate');
  await new Promise((r) => setTimeout(r, 50));
  t.equal(hub.store.queue.counts().done, 1);
  t.equal(hub.registry.get('w-1')!.done, 1, 'the worker ran it once');
});

t.test('a worker with a wrong token is refused with SWARM_ERR_AUTH', async (t) => {
  const { addr, stop } = await startHub({ token: 'right-token-123' });
  t.teardown(stop);
  const reply = await rawExchange(addr, [{ ver: 1, id: newId(), type: 'HANDSHAKE', src: 'x', dst: '', payload: { driver: 'echo', token: 'wrong-token' } }]);
  t.match(reply.lines[0], { type: 'ERROR', payload: { code: 'SWARM_ERR_AUTH' } });
  t.ok(reply.closed, 'connection closed');
  const none = await rawExchange(addr, [{ ver: 1, id: newId(), type: 'HANDSHAKE', src: 'x', dst: '', payload: { driver: 'echo' } }]);
  t.match(none.lines[0], { payload: { code: 'SWARM_ERR_AUTH' } }, 'missing token refused too');
});

t.test('a worker with the right token joins and works', async (t) => {
  const { hub, addr, stop } = await startHub({ token: 'right-token-123' });
  const pool = startPool(addr, 1, { token: 'right-token-123' });
  t.teardown(async () => { await pool.stop(); await stop(); });
  t.ok(await waitWorkers(hub, 1));
  await hub.submit([{ prompt: 'hi', id: 'a' }]);
  t.ok(await waitTasks(hub, 1));
  t.equal(hub.store.queue.get('a')?.result?.text, 'echo: hi');
});

t.test('the hub refuses a non-loopback bind without a token', async (t) => {
  t.throws(() => hubConfig({ host: '0.0.0.0' }), { code: 'SWARM_ERR_INSECURE_BIND' });
  t.ok(hubConfig({ host: '0.0.0.0', token: 'long-enough-token' }), 'with a token it is allowed');
});

t.test('a connection that sends no HANDSHAKE is closed with SWARM_ERR_HANDSHAKE_TIMEOUT', async (t) => {
  const { addr, stop } = await startHub({ handshakeTimeoutMs: 200 });
  t.teardown(stop);
  const reply = await rawExchange(addr, [], 3000);
  t.match(reply.lines[0], { type: 'ERROR', payload: { code: 'SWARM_ERR_HANDSHAKE_TIMEOUT' } });
  t.ok(reply.closed);
});

t.test('KILL stops a worker cleanly and it leaves the registry', async (t) => {
  const { hub, addr, stop } = await startHub();
  const pool = startPool(addr, 2);
  t.teardown(async () => { await pool.stop(); await stop(); });
  await waitWorkers(hub, 2);
  t.ok(hub.kill('w-1', 'test'));
  const gone = await new Promise<boolean>((resolve) => {
    const deadline = Date.now() + 5000;
    const check = () => (!hub.registry.get('w-1') ? resolve(true) : Date.now() > deadline ? resolve(false) : setTimeout(check, 10));
    check();
  });
  t.ok(gone, 'w-1 disconnected');
  t.equal(pool.pool.agents[0]!.state, 'STOPPED');
  t.ok(hub.registry.get('w-2'), 'w-2 still connected');
});

t.test('a silent worker is declared dead and its task goes to another worker', async (t) => {
  const { hub, addr, stop } = await startHub({ heartbeatMs: 50, deadAfterMs: 300 });
  t.teardown(stop);
  // A raw worker that handshakes, takes a task, and then says nothing.
  const sock = net.connect(addr);
  t.teardown(() => sock.destroy());
  await new Promise((r) => sock.once('connect', r));
  sock.write(encodeLine({ ver: 1, id: newId(), type: 'HANDSHAKE', src: 'mute', dst: '', payload: { driver: 'echo', worker_id: 'mute', codecs: ['ndjson'] } }));
  await waitWorkers(hub, 1);
  await hub.submit([{ prompt: 'orphan', id: 'o-1' }]);
  await new Promise((r) => setTimeout(r, 50));
  t.equal(hub.store.queue.get('o-1')?.state, 'leased', 'leased to the mute worker');
  const pool = startPool(addr, 1, { prefix: 'good' });
  t.teardown(() => pool.stop());
  t.ok(await waitTasks(hub, 1, 5000), 'finished after the mute worker was declared dead');
  const rec = hub.store.queue.get('o-1')!;
  t.equal(rec.result?.worker, 'good-1');
  t.equal(rec.state, 'done');
  t.notOk(hub.registry.get('mute'), 'mute worker dropped');
});

/** Send frames on a raw socket; collect reply lines until close or timeout. */
async function rawExchange(addr: { host: string; port: number }, msgs: unknown[], ms = 2000): Promise<{ lines: any[]; closed: boolean }> {
  const sock = net.connect(addr);
  await new Promise((r) => sock.once('connect', r));
  for (const m of msgs) sock.write(encodeLine(m));
  let buf = '';
  let closed = false;
  sock.on('data', (c) => (buf += c.toString()));
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    sock.once('close', () => { closed = true; clearTimeout(t); resolve(); });
  });
  sock.destroy();
  return { lines: buf.split('\n').filter(Boolean).map((l) => JSON.parse(l)), closed };
}
