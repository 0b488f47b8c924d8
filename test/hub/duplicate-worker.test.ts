import t from 'tap';
import net from 'node:net';
import { Hub, hubConfig } from '../../hub/index.js';
import { quiet, startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/** Keep a raw worker audibly alive (what a healthy worker's heartbeats do). */
function beat(w: RawWorker, ms = 50): () => void {
  const timer = setInterval(() => { if (!w.closed) w.send('HEARTBEAT', { load: 0, status: 'idle' }); }, ms);
  return () => clearInterval(timer);
}

t.test('a second HANDSHAKE with the id of a live worker is refused with SWARM_ERR_DUPLICATE_WORKER and closed', async (t) => {
  const { hub, addr, stop } = await startHub({ heartbeatMs: 100, deadAfterMs: 4000 });
  const a = await RawWorker.connect(addr);
  const stopBeat = beat(a);
  t.teardown(async () => { stopBeat(); a.destroy(); await stop(); });
  const ackA = await a.handshake({ worker_id: 'w-x' });
  t.equal(ackA?.type, 'HANDSHAKE_ACK');
  t.type(ackA.payload.session, 'string', 'the ACK carries a session');
  const intruder = await RawWorker.connect(addr);
  const reply = await intruder.handshake({ worker_id: 'w-x' });
  t.match(reply, { type: 'ERROR', payload: { code: 'SWARM_ERR_DUPLICATE_WORKER', fatal: true } });
  t.ok(await intruder.waitClosed(), 'the duplicate is closed');
  // A wrong session is no better than none.
  const guesser = await RawWorker.connect(addr);
  const reply2 = await guesser.handshake({ worker_id: 'w-x', session: 'not-the-session' });
  t.match(reply2, { payload: { code: 'SWARM_ERR_DUPLICATE_WORKER' } });
  t.ok(await guesser.waitClosed());
  // The original keeps its place and its work.
  t.equal(hub.registry.get('w-x')?.conn.socket.localPort, a.sock.remotePort, 'the first connection is still the registered one');
  await hub.submit([{ id: 'd-1', prompt: 'p' }]);
  const req = await a.next((f) => f.type === 'TASK_REQ');
  t.equal(req?.payload.task_id, 'd-1', 'the original still gets tasks');
  t.notOk(a.closed);
  t.equal(hub.metrics.protocolErrors.get('SWARM_ERR_DUPLICATE_WORKER'), undefined, 'a refusal is not a protocol error of the original');
});

t.test('a reconnect that presents its session replaces a half-open old link at once; its task is requeued', async (t) => {
  const { hub, addr, stop } = await startHub({ heartbeatMs: 100, deadAfterMs: 60_000 });
  const old = await RawWorker.connect(addr);
  t.teardown(async () => { old.destroy(); await stop(); });
  const ack = await old.handshake({ worker_id: 'w-r' });
  await hub.submit([{ id: 'r-1', prompt: 'p' }]);
  t.equal((await old.next((f) => f.type === 'TASK_REQ'))?.payload.task_id, 'r-1', 'the old link holds a task');
  // The old socket stays open at the hub and was heard just now: only the session can get the new one in.
  const again = await RawWorker.connect(addr);
  t.teardown(() => again.destroy());
  const ack2 = await again.handshake({ worker_id: 'w-r', session: ack.payload.session });
  t.equal(ack2?.type, 'HANDSHAKE_ACK', 'accepted');
  t.not(ack2.payload.session, ack.payload.session, 'a new session for the new link');
  t.ok(await old.waitClosed(), 'the hub closed the old link');
  const req = await again.next((f) => f.type === 'TASK_REQ' && f.payload.task_id === 'r-1');
  t.equal(req?.payload.attempt, 2, 'the old link\'s task came back to the queue and to the new link');
  again.send('TASK_RES', { task_id: 'r-1', text: 'ok', done: true, seq: 0 }, { re: req.id });
  t.ok(await until(() => hub.store.queue.get('r-1')?.state === 'done'));
  t.equal(hub.registry.size, 1);
});

t.test('without a session, the id is free once the old link has been quiet for half the dead-after time', async (t) => {
  const { hub, addr, stop } = await startHub({ heartbeatMs: 100, deadAfterMs: 1600 });
  const old = await RawWorker.connect(addr);
  t.teardown(async () => { old.destroy(); await stop(); });
  await old.handshake({ worker_id: 'w-h' });
  // The old link now says nothing (a half-open socket after a cut). Retry like a worker would.
  let refused = 0;
  let accepted: RawWorker | undefined;
  for (let i = 0; i < 100 && !accepted; i++) {
    const w = await RawWorker.connect(addr);
    const r = await w.handshake({ worker_id: 'w-h' });
    if (r?.type === 'HANDSHAKE_ACK') accepted = w;
    else { t.equal(r?.payload?.code, 'SWARM_ERR_DUPLICATE_WORKER', '', { diagnostic: false }); refused++; w.destroy(); await new Promise((res) => setTimeout(res, 100)); }
  }
  t.teardown(() => accepted?.destroy());
  t.ok(accepted, `accepted after ${refused} refusal(s)`);
  t.ok(refused >= 1, 'refused while the old link was recent');
  t.ok(await old.waitClosed(), 'the quiet old link was dropped');
  t.equal(hub.registry.size, 1);
});

/** A TCP proxy whose links can be frozen: bytes stop and a close is not passed on (a half-open link). */
async function freezer(target: { host: string; port: number }) {
  const links: { client: net.Socket; up: net.Socket; frozen: boolean }[] = [];
  const server = net.createServer((client) => {
    const up = net.connect(target);
    const l = { client, up, frozen: false };
    links.push(l);
    client.on('data', (c) => { if (!l.frozen) up.write(c); });
    up.on('data', (c) => { if (!l.frozen) client.write(c); });
    client.on('error', () => {}); up.on('error', () => {});
    client.on('close', () => { if (!l.frozen) up.destroy(); });
    up.on('close', () => { if (!l.frozen) client.destroy(); });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    addr: { host: '127.0.0.1', port },
    freezeAll: () => { for (const l of links) l.frozen = true; },
    close: async () => { for (const l of links) { l.client.destroy(); l.up.destroy(); } await new Promise((r) => server.close(r)); },
  };
}

t.test('a real worker whose link goes half-open reconnects at once with its session and keeps working', async (t) => {
  // A long dead-after time: the hub will not notice the cut by itself during this test.
  const downs: string[] = []; // what a supervisor would hear (it kills the process of a worker that is down)
  const hub = new Hub(hubConfig({ port: 0, fsyncMs: 0, heartbeatMs: 200, deadAfterMs: 60_000 }), quiet, { workerDown: (id) => downs.push(id) });
  const addr = await hub.start();
  const stop = () => hub.stop({ killWorkers: true, graceMs: 1000 });
  const proxy = await freezer(addr);
  const pool = startPool(proxy.addr, 1, { prefix: 'hw' });
  t.teardown(async () => { await pool.stop(); await proxy.close(); await stop(); });
  t.ok(await waitWorkers(hub, 1));
  const first = hub.registry.get('hw-1')!;
  await hub.submit([{ id: 'h-1', prompt: 'before' }]);
  t.ok(await waitTasks(hub, 1));
  // Cut: the hub's socket stays open (nothing reaches it, not even the close); the worker drops its side.
  proxy.freezeAll();
  pool.pool.agents[0]!.client.conn!.destroy('test: link lost');
  t.ok(await until(() => hub.registry.get('hw-1') !== undefined && hub.registry.get('hw-1') !== first), 'the worker is back under its id');
  t.ok(first.conn.isClosed, 'the half-open old connection was closed by the hub');
  await hub.submit([{ id: 'h-2', prompt: 'after' }]);
  t.ok(await waitTasks(hub, 2));
  t.equal(hub.store.queue.get('h-2')?.result?.text, 'echo: after');
  t.equal(hub.store.queue.get('h-2')?.result?.worker, 'hw-1');
  t.same(downs, [], 'the replaced link is not reported down (a supervisor would kill the reconnected process)');
});
