import t, { type Test } from 'tap';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/** A raw worker joined to the hub; `take()` waits for the next TASK_REQ (attempt >= n). */
async function joined(addr: { host: string; port: number }, id: string, codecs = ['ndjson']) {
  const w = await RawWorker.connect(addr);
  const ack = await w.handshake({ worker_id: id, codecs });
  if (ack?.type !== 'HANDSHAKE_ACK') throw new Error(`not accepted: ${JSON.stringify(ack)}`);
  const seen = new Set<Frame>();
  const take = async (attempt = 1): Promise<Frame> => {
    const f = await w.next((x) => x.type === 'TASK_REQ' && !seen.has(x) && x.payload.attempt >= attempt, 10_000);
    if (f) seen.add(f);
    return f;
  };
  return { w, take };
}

/** A hub and one raw worker `id` (both gone after the test), the worker given task `taskId`: its TASK_REQ. */
async function withTask(t: Test, id: string, task: { id: string; prompt: string; max_attempts?: number }) {
  const { hub, addr, stop } = await startHub();
  const { w, take } = await joined(addr, id);
  t.teardown(async () => { w.destroy(); await stop(); });
  await hub.submit([task]);
  return { hub, w, take, req: await take() };
}

t.test('an ERROR that fails validation still releases the task it names (task_id or re)', async (t) => {
  const { hub, w, take, req: req1 } = await withTask(t, 'bad-errors', { id: 'e-1', prompt: 'one', max_attempts: 5 });
  t.equal(req1?.payload.task_id, 'e-1', 'leased');
  // A code outside the catalogue, with the task id: BAD_PAYLOAD back, and the task is retried.
  const bad1 = w.send('ERROR', { code: 'MY_OWN_CODE', msg: 'boom', task_id: 'e-1' }, { re: req1.id });
  const reply1 = await w.next((f) => f.re === bad1);
  t.match(reply1, { type: 'ERROR', payload: { code: 'SWARM_ERR_BAD_PAYLOAD' } }, 'the bad frame is answered with its code');
  const req2 = await take(2);
  t.equal(req2?.payload.task_id, 'e-1', 'released and leased again at once (no 10-minute lease wait)');
  // Now the task id itself is malformed: the envelope `re` names the TASK_REQ.
  const bad2 = w.send('ERROR', { code: 'SWARM_ERR_TASK_FAILED', msg: 'x', task_id: 42 }, { re: req2.id });
  t.match(await w.next((f) => f.re === bad2), { payload: { code: 'SWARM_ERR_BAD_PAYLOAD' } });
  const req3 = await take(3);
  t.equal(req3?.payload.task_id, 'e-1', 'found by re and released');
  // A bad TASK_RES is the same: the attempt's answer is lost, so the task runs again.
  const bad3 = w.send('TASK_RES', { task_id: 'e-1', text: 7, done: true }, { re: req3.id });
  t.match(await w.next((f) => f.re === bad3), { payload: { code: 'SWARM_ERR_BAD_PAYLOAD' } });
  const req4 = await take(4);
  w.send('TASK_RES', { task_id: 'e-1', text: 'fine', done: true, seq: 0, receipt: { duration_ms: 1 } }, { re: req4.id });
  t.ok(await until(() => hub.store.queue.get('e-1')?.state === 'done'), 'done on the fourth attempt');
  t.equal(hub.store.queue.get('e-1')?.result?.text, 'fine');
  t.equal(hub.store.queue.get('e-1')?.attempts, 4);
  // A valid ERROR without task_id names its task by `re` alone.
  await hub.submit([{ id: 'e-2', prompt: 'two', max_attempts: 5 }]);
  const r1 = await take();
  t.equal(r1?.payload.task_id, 'e-2');
  w.send('ERROR', { code: 'SWARM_ERR_ENGINE_DIED', msg: 'engine gone' }, { re: r1.id });
  const r2 = await take(2);
  t.equal(r2?.payload.task_id, 'e-2', 'an ERROR with only re released its task');
  w.send('TASK_RES', { task_id: 'e-2', text: 'two ok', done: true }, { re: r2.id });
  t.ok(await until(() => hub.store.queue.get('e-2')?.state === 'done'));
  // An invalid ERROR that names nothing leased changes nothing and is still answered.
  const bad4 = w.send('ERROR', { code: 'NOPE', msg: 'x', task_id: 'not-mine' });
  t.match(await w.next((f) => f.re === bad4), { payload: { code: 'SWARM_ERR_BAD_PAYLOAD' } });
  t.ok(hub.registry.get('bad-errors'), 'the worker stays connected');
});

t.test('streamed pieces are put together by seq: out of order and duplicated pieces give the right text', async (t) => {
  const { hub, w, take, req } = await withTask(t, 'shuffler', { id: 's-1', prompt: 'p' });
  const piece = (seq: number, text: string) => w.send('TASK_RES', { task_id: 's-1', text, done: false, seq }, { re: req.id });
  piece(2, 'C'); piece(0, 'A'); piece(0, 'A'); piece(3, 'D'); piece(1, 'B'); piece(2, 'C');
  w.send('TASK_RES', { task_id: 's-1', text: 'E', done: true, seq: 4, receipt: { duration_ms: 2 } }, { re: req.id });
  t.ok(await until(() => hub.store.queue.get('s-1')?.state === 'done'));
  t.equal(hub.store.queue.get('s-1')?.result?.text, 'ABCDE', 'assembled by seq, duplicates dropped');
  // Pieces after the final frame are dropped; the result stays.
  piece(5, 'late');
  await hub.submit([{ id: 's-2', prompt: 'q' }]);
  const req2 = await take();
  w.send('TASK_RES', { task_id: 's-2', text: 'one piece', done: true, seq: 0 }, { re: req2.id });
  t.ok(await until(() => hub.store.queue.get('s-2')?.state === 'done'));
  t.equal(hub.store.queue.get('s-1')?.result?.text, 'ABCDE');
  t.equal(hub.store.queue.get('s-2')?.result?.text, 'one piece');
  t.equal(hub.metrics.protocolErrors.size, 0, 'nothing here is a protocol error');
});

t.test('a final frame with pieces missing fails that attempt with SWARM_ERR_STREAM_GAP; the retry is recorded', async (t) => {
  const { hub, w, take, req } = await withTask(t, 'gappy', { id: 'g-1', prompt: 'p' });
  w.send('TASK_RES', { task_id: 'g-1', text: 'A', done: false, seq: 0 }, { re: req.id });
  w.send('TASK_RES', { task_id: 'g-1', text: 'C', done: false, seq: 2 }, { re: req.id });
  const fin = w.send('TASK_RES', { task_id: 'g-1', text: 'D', done: true, seq: 3 }, { re: req.id });
  const err = await w.next((f) => f.re === fin && f.type === 'ERROR');
  t.match(err, { payload: { code: 'SWARM_ERR_STREAM_GAP', task_id: 'g-1' } }, 'the worker is told');
  t.match(err.payload.msg, /first 1/, 'the first missing seq is named');
  const again = await take(2);
  t.equal(again?.payload.task_id, 'g-1', 'leased again');
  t.equal(hub.store.queue.get('g-1')?.state, 'leased');
  // A final frame whose seq is lower than a piece's is inconsistent too.
  w.send('TASK_RES', { task_id: 'g-1', text: 'X', done: false, seq: 5 }, { re: again.id });
  const fin2 = w.send('TASK_RES', { task_id: 'g-1', text: 'Y', done: true, seq: 1 }, { re: again.id });
  t.match(await w.next((f) => f.re === fin2 && f.type === 'ERROR'), { payload: { code: 'SWARM_ERR_STREAM_GAP' } });
  const third = await take(3);
  w.send('TASK_RES', { task_id: 'g-1', text: 'whole', done: true }, { re: third.id });
  t.ok(await until(() => hub.store.queue.get('g-1')?.state === 'done'));
  t.equal(hub.store.queue.get('g-1')?.result?.text, 'whole', 'a frame without seq is a one-piece answer');
  t.equal(hub.store.queue.get('g-1')?.attempts, 3);
});

t.test('msgpack frames with 64-bit integers are accepted (decoded as numbers)', async (t) => {
  const { hub, addr, stop } = await startHub({ msgpack: true });
  const { w, take } = await joined(addr, 'wide-ints', ['msgpack', 'ndjson']);
  t.teardown(async () => { w.destroy(); await stop(); });
  t.equal(w.codec, 'msgpack', 'msgpack negotiated');
  // encodeMsgpack writes BigInt as int64 (0xd3): exactly what a C or Go worker's uint64 field sends.
  w.send('HEARTBEAT', { load: 0, status: 'idle', inflight: 0n, epoch: 7n });
  await hub.submit([{ id: 'm-1', prompt: 'p' }]);
  const req = await take();
  t.equal(req?.payload.task_id, 'm-1');
  w.send('TASK_RES', { task_id: 'm-1', text: 'a', done: false, seq: 0n }, { re: req.id });
  w.send('TASK_RES', {
    task_id: 'm-1', text: 'b', done: true, seq: 1n,
    receipt: { duration_ms: 3n, started_at: 1763800000000n, finished_at: 1763800000412n, tokens_out: 2n, attempt: 1n },
  }, { re: req.id });
  t.ok(await until(() => hub.store.queue.get('m-1')?.state === 'done'));
  const rec = hub.store.queue.get('m-1')!;
  t.equal(rec.result?.text, 'ab');
  t.equal(rec.result?.receipt?.finished_at, 1763800000412, 'an epoch-ms uint64 arrives as a number');
  t.equal(hub.metrics.protocolErrors.size, 0, 'no frame was refused');
  // An ERROR with an int64 status is valid too, and releases its task.
  await hub.submit([{ id: 'm-2', prompt: 'q', max_attempts: 1 }]);
  const req2 = await take();
  w.send('ERROR', { code: 'SWARM_ERR_TASK_FAILED', msg: 'no', status: 500n, task_id: 'm-2' }, { re: req2.id });
  t.ok(await until(() => hub.store.queue.get('m-2')?.state === 'failed'), 'the ERROR was understood');
  t.equal(hub.metrics.protocolErrors.size, 0);
});
