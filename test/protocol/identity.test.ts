import t from 'tap';
import { workerCredential } from '../../protocol/index.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { startHub } from '../helpers/inproc.js';
import { fixtureFile } from '../helpers/paths.js';

const TOKEN = 'identity-test-token-0123456789';

async function join(addr: { host: string; port: number }, id: string, token = TOKEN): Promise<{ w: RawWorker; reply: Frame }> {
  const w = await RawWorker.connect(addr);
  const reply = await w.handshake({ worker_id: id, token, slots: 1 });
  return { w, reply };
}

const reqFor = (w: RawWorker, task: string) => w.next((f) => f.type === 'TASK_REQ' && f.payload.task_id === task, 10_000);

t.test('a worker credential admits its own id and no other', async (t) => {
  const { addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  const own = await join(addr, 'w-a', workerCredential(TOKEN, 'w-a'));
  t.equal(own.reply?.type, 'HANDSHAKE_ACK', 'w-a joins with its credential');
  const other = await join(addr, 'w-b', workerCredential(TOKEN, 'w-a'));
  t.match(other.reply, { type: 'ERROR', payload: { code: 'SWARM_ERR_AUTH' } }, 'w-a\'s credential does not admit w-b');
  const anon = await RawWorker.connect(addr);
  const none = { w: anon, reply: await anon.handshake({ token: workerCredential(TOKEN, 'w-a'), slots: 1 }) };
  t.match(none.reply, { type: 'ERROR', payload: { code: 'SWARM_ERR_AUTH' } }, 'nor a worker that names no id');
  const bad = await join(addr, 'w-c', 'not-the-token-at-all');
  t.match(bad.reply, { type: 'ERROR', payload: { code: 'SWARM_ERR_AUTH' } });
  for (const x of [own, other, none, bad]) x.w.destroy();
});

t.test('a forged final TASK_RES from a worker without the lease is refused; the real answer is recorded', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  const a = await join(addr, 'w-a');
  t.equal(a.reply?.type, 'HANDSHAKE_ACK');
  await hub.submit([{ id: 'victim', prompt: 'real question' }]);
  const req = await reqFor(a.w, 'victim');
  t.ok(req, 'w-a holds the lease');
  const b = await join(addr, 'w-b');
  t.equal(b.reply?.type, 'HANDSHAKE_ACK');
  const forged = b.w.send('TASK_RES', { task_id: 'victim', text: 'forged', done: true, seq: 0 });
  const err = await b.w.next((f) => f.type === 'ERROR' && f.re === forged);
  t.match(err, { payload: { code: 'SWARM_ERR_UNKNOWN_TASK', task_id: 'victim' } }, 'the forger gets an ERROR');
  t.equal(hub.store.queue.get('victim')!.state, 'leased', 'nothing recorded');
  a.w.send('TASK_RES', { task_id: 'victim', text: 'real answer', done: true, seq: 0 }, { re: req.id });
  await new Promise((r) => setTimeout(r, 0));
  const ok = await waitFor(() => hub.store.queue.get('victim')!.state === 'done');
  t.ok(ok, 'the lease holder\'s answer is recorded');
  t.match(hub.store.queue.get('victim')!.result, { text: 'real answer', worker: 'w-a' });
  t.equal(hub.metrics.duplicateResults, 0);
  a.w.destroy(); b.w.destroy();
});

t.test('HANDBACK only from a worker that joined as a failover peer', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  await hub.submit([{ id: 'other', prompt: 'p' }]);
  const b = await RawWorker.connect(addr);
  t.equal((await b.handshake({ worker_id: 'w-b', token: TOKEN, slots: 1 }))?.type, 'HANDSHAKE_ACK');
  const req = await reqFor(b, 'other');
  t.ok(req);
  const hb = b.send('HANDBACK', { entries: [{ id: 'other', result: { text: 'handed', worker: 'w-z', attempt: 1 } }] });
  const err = await b.next((f) => f.type === 'ERROR' && f.re === hb);
  t.match(err, { payload: { code: 'SWARM_ERR_UNEXPECTED' } }, 'refused with an ERROR');
  t.not(hub.store.queue.get('other')!.state, 'done', 'nothing merged');
  b.destroy();
});

t.test('spec section 4 literally: TASK_RES {text, done} with re = the TASK_REQ id is recorded; a null payload gets an ERROR', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  const a = await join(addr, 'spec-w');
  await hub.submit([{ id: 'lit', prompt: 'hello' }]);
  const req = await reqFor(a.w, 'lit');
  a.w.send('TASK_RES', { text: 'hel', done: false }, { re: req.id });
  a.w.send('TASK_RES', { text: 'lo', done: true }, { re: req.id });
  t.ok(await waitFor(() => hub.store.queue.get('lit')!.state === 'done'), 'recorded without task_id');
  t.equal(hub.store.queue.get('lit')!.result?.text, 'hello', 'pieces joined in order');
  const orphan = a.w.send('TASK_RES', { text: 'x', done: true }, { re: 'no-such-req' });
  t.match(await a.w.next((f) => f.type === 'ERROR' && f.re === orphan), { payload: { code: 'SWARM_ERR_UNKNOWN_TASK' } }, 'naming nothing it holds is an ERROR');
  for (const payload of [null, 5, 'x', [1]]) {
    const id = a.w.send('HEARTBEAT', payload);
    t.match(await a.w.next((f) => f.type === 'ERROR' && f.re === id), { payload: { code: 'SWARM_ERR_BAD_PAYLOAD' } }, `payload ${JSON.stringify(payload)} gets an ERROR`);
  }
  a.w.destroy();
});

async function waitFor(cond: () => boolean, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return cond();
}

t.test('a worker that follows the spec\'s section 4 literally (no task_id, no re, ERROR code 500) runs tasks, each recorded once', async (t) => {
  const { spawn } = await import('node:child_process');
  const path = await import('node:path');
  const { hub, addr, stop } = await startHub({ token: TOKEN, maxAttempts: 1 });
  const py = spawn('python3', [fixtureFile('spec-worker.py'), '--port', String(addr.port), '--host', addr.host, '--token', TOKEN], { stdio: 'ignore' });
  const exited = new Promise<number | null>((r) => py.once('exit', (c) => r(c)));
  t.teardown(async () => { if (py.exitCode === null) py.kill('SIGKILL'); await stop(); });
  t.ok(await waitFor(() => hub.registry.size === 1), 'it joined (named by its src)');
  t.ok(hub.registry.get('worker-5002'));
  const ids = Array.from({ length: 10 }, (_, i) => `s-${i}`);
  await hub.submit([...ids.map((id) => ({ id, prompt: `say ${id} in pieces` })), { id: 'bad', prompt: 'fail now' }]);
  t.ok(await waitFor(() => { const c = hub.store.queue.counts(); return c.done + c.failed === 11; }, 20_000), 'all final');
  for (const id of ids) t.equal(hub.store.queue.get(id)!.result?.text, `SAY ${id.toUpperCase()} IN PIECES`, `${id} answered`);
  t.match(hub.store.queue.get('bad')!.error?.msg, /Process died/, 'its ERROR 500 failed its task');
  t.equal(hub.metrics.duplicateResults, 0);
  t.equal(hub.metrics.protocolErrors.size, 0, 'nothing it sent was refused');
  hub.kill('worker-5002', 'test over');
  t.equal(await exited, 0, 'it leaves on KILL');
});

t.test('placeholder tokens are refused off loopback; no auth only behind --insecure-no-auth, with a warning', async (t) => {
  const { hubConfig } = await import('../../hub/index.js');
  for (const token of ['REPLACE-WITH-A-LONG-RANDOM-TOKEN', 'changeme', 'short-token']) {
    t.throws(() => hubConfig({ host: '0.0.0.0', token }), { code: 'SWARM_ERR_INSECURE_BIND' }, `${token} refused on 0.0.0.0`);
  }
  t.ok(hubConfig({ host: '0.0.0.0', token: 'a-long-random-token-9f8e7d6c' }), 'a real token is taken');
  t.ok(hubConfig({ host: '127.0.0.1', token: 'changeme' }), 'loopback only: not refused');
  const { startHub: startCliHub, killGroup } = await import('../helpers/failover.js');
  const { hubFile, tempDir } = await import('../helpers/cli.js');
  const dir = tempDir(t);
  const hub = await startCliHub(dir, ['--insecure-no-auth']);
  t.teardown(() => killGroup(hub));
  t.equal(hubFile(dir)!.token, undefined, 'no token');
  t.match(hub.output(), /warning: --insecure-no-auth/, 'said loudly');
  const res = await fetch(`http://${hubFile(dir)!.control.host}:${hubFile(dir)!.control.port}/status`);
  t.equal(res.status, 200, 'the control API answers anyone');
});
