import t, { type Test } from 'tap';
import { WorkerEntry } from '../../hub/worker-entry.js';
import { workerConfig } from '../../worker/config.js';
import type { Connection } from '../../protocol/index.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

const conn = { writable: true } as unknown as Connection;
const entry = (queue: number, prefetchBelowMs: number) =>
  new WorkerEntry({ id: 'w', role: '', driver: 'echo', caps: [], slots: 2, conn, session: 's', queue, prefetchBelowMs });

t.test('a worker is leased its queue only while its recent tasks are short', async (t) => {
  const w = entry(3, 5);
  t.equal(w.capacity, 2, 'no run time known yet: its slots');
  w.ran(0.2);
  t.equal(w.capacity, 5, 'short tasks: slots + queue');
  for (let i = 0; i < 30; i++) w.ran(900);
  t.equal(w.capacity, 2, 'long tasks: slots only');
  for (let i = 0; i < 30; i++) w.ran(0.1);
  t.equal(w.capacity, 5, 'short again');
  w.refusedQueued();
  t.equal(w.capacity, 2, 'it gave a queued task back: slots until it finishes one');
  w.ran(0.1);
  t.equal(w.capacity, 5);
  w.ran(Number.NaN);
  t.equal(w.capacity, 5, 'a bad duration is ignored');
  t.equal(entry(3, 0).capacity, 2, 'prefetch off (0 ms)');
  const off = entry(3, 0); off.ran(0);
  t.equal(off.capacity, 2, 'prefetch off stays off');
  const none = entry(0, 5); none.ran(0);
  t.equal(none.capacity, 2, 'a worker without a queue');
});

/** A raw worker that answers each TASK_REQ after `runMs`, one at a time, and records how many were outstanding. */
async function rawRunner(addr: { host: string; port: number }, id: string, queue: number, runMs: number) {
  const w = await RawWorker.connect(addr);
  const ack = await w.handshake({ worker_id: id, slots: 1, queue, driver: 'echo' });
  let outstanding = 0, most = 0, busy = false;
  const backlog: Frame[] = [];
  const answered = new Set<string>();
  const runNext = () => {
    if (busy || !backlog.length) return;
    busy = true;
    const f = backlog.shift()!;
    setTimeout(() => {
      outstanding--;
      answered.add(f.payload.task_id);
      w.send('TASK_RES', { task_id: f.payload.task_id, text: 'ok', done: true, seq: 0, receipt: { duration_ms: runMs } }, { re: f.id });
      busy = false;
      runNext();
    }, runMs);
  };
  let seen = 0;
  const poll = setInterval(() => {
    for (; seen < w.frames.length; seen++) {
      const f = w.frames[seen]!;
      if (f.type !== 'TASK_REQ') continue;
      outstanding++; most = Math.max(most, outstanding);
      backlog.push(f); runNext();
    }
  }, 1);
  return { ack, w, answered, most: () => most, stop: () => { clearInterval(poll); w.destroy(); } };
}

t.test('the hub fills a worker\'s queue for short tasks and never for long ones (real sockets)', async (t) => {
  for (const [runMs, expectMost] of [[0, 4], [30, 1]] as const) {
    const { hub, addr, stop } = await startHub();
    const r = await rawRunner(addr, `raw-${runMs}`, 3, runMs);
    t.equal(r.ack?.type, 'HANDSHAKE_ACK');
    const n = runMs ? 12 : 200;
    const acc = await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: `p${i}`, id: `t-${runMs}-${i}` })));
    t.equal(acc.length, n);
    t.ok(await waitTasks(hub, n, 20_000), `${n} tasks finished (${runMs} ms each)`);
    const c = hub.store.queue.counts();
    t.equal(c.done, n, 'all done: nothing lost');
    t.equal(r.answered.size, n, 'each answered once');
    t.equal(hub.metrics.duplicateResults, 0, 'no duplicate results');
    t.equal(r.most(), expectMost, runMs ? 'long tasks: never more than the one slot' : 'short tasks: slot + queue of 3 outstanding');
    r.stop();
    await stop();
  }
});

/** A raw hub socket for one real agent: it sends what it likes and sees every frame the agent sends. */
async function rawHub(t: Test) {
  const net = await import('node:net');
  const { LineDecoder, encodeLine, newId } = await import('../../protocol/index.js');
  const frames: Frame[] = [];
  let sock: import('node:net').Socket | undefined;
  const server = net.createServer((s) => {
    sock = s;
    const dec = new LineDecoder({ frame: (v) => {
      const f = v as Frame;
      frames.push(f);
      if (f.type === 'HANDSHAKE') s.write(encodeLine({ ver: 1, id: newId(), re: f.id, type: 'HANDSHAKE_ACK', src: 'hub', dst: '', payload: { status: 'ok', worker_id: f.payload.worker_id, codec: 'ndjson', session: 'x', config: { heartbeat_ms: 60_000, dead_after_ms: 120_000 } } }));
    }, error: () => {} });
    s.on('data', (c: Buffer) => dec.push(c));
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => { sock?.destroy(); server.close(); });
  const frame = (type: string, payload: unknown) => encodeLine({ ver: 1, id: newId(), type, src: 'hub', dst: '', payload });
  return {
    port: (server.address() as import('node:net').AddressInfo).port,
    frames,
    /** TASK_REQs for these ids, all in one write (so they arrive in one read). */
    tasks: (ids: string[], prompt = 'x') => sock!.write(Buffer.concat(ids.map((task_id) => frame('TASK_REQ', { task_id, prompt, stop: [], attempt: 1 })))),
    cancel: (task_id: string) => sock!.write(frame('ERROR', { code: 'SWARM_ERR_CANCELLED', msg: 'run cancelled', task_id })),
    results: () => frames.filter((f) => f.type === 'TASK_RES' && f.payload.done).map((f) => f.payload.task_id as string),
    errors: (code: string) => frames.filter((f) => f.type === 'ERROR' && f.payload.code === code).map((f) => f.payload.task_id as string),
  };
}

t.test('an agent runs queued tasks in arrival order on its one slot', async (t) => {
  const hub = await rawHub(t);
  const pool = startPool({ host: '127.0.0.1', port: hub.port }, 1, { driver: 'echo' });
  t.teardown(() => pool.stop());
  t.ok(await until(() => hub.frames.some((f) => f.type === 'HANDSHAKE'), 5000));
  t.equal(hub.frames.find((f) => f.type === 'HANDSHAKE')!.payload.queue, 8, 'HANDSHAKE says how many it queues');
  const ids = Array.from({ length: 9 }, (_, i) => `s${i + 1}`);
  hub.tasks(ids);
  t.ok(await until(() => hub.results().length === 9, 5000));
  t.same(hub.results(), ids, 'in order, each once');
  t.equal(hub.frames.filter((f) => f.type === 'ERROR').length, 0, 'nothing refused');
});

t.test('behind a long task: queued tasks go back (SLOTS_FULL), the one past the queue at once, a cancelled one is dropped', async (t) => {
  const hub = await rawHub(t);
  // 200 ms a word: the first task runs ~1.4 s, far past the 400 ms a queued task may wait here (the
  // default 50 ms left too little time to cancel one before the give-back on a loaded machine).
  const pool = startPool({ host: '127.0.0.1', port: hub.port }, 1, { driver: 'echo', options: { token_ms: '200' }, config: workerConfig({ agent: { queueHoldMs: 400, queue: 4 } }) });
  t.teardown(() => pool.stop());
  t.ok(await until(() => hub.frames.some((f) => f.type === 'HANDSHAKE'), 5000));
  const t0 = performance.now();
  hub.tasks(['long', 'q1', 'q2', 'q3', 'q4', 'past'], 'a b c d e f g');
  t.ok(await until(() => hub.errors('SWARM_ERR_SLOTS_FULL').includes('past'), 2000));
  t.notOk(hub.errors('SWARM_ERR_SLOTS_FULL').includes('q1'), 'the queued ones wait their hold time first');
  hub.cancel('q2');
  t.ok(await until(() => hub.errors('SWARM_ERR_CANCELLED').includes('q2'), 2000), 'a cancelled queued task is answered CANCELLED');
  t.ok(await until(() => hub.errors('SWARM_ERR_SLOTS_FULL').length === 4, 2000));
  const backAt = performance.now() - t0;
  t.same(hub.errors('SWARM_ERR_SLOTS_FULL').sort(), ['past', 'q1', 'q3', 'q4'], 'given back: the three still queued and the one past the queue');
  t.ok(backAt >= 395, `given back after the hold time (${backAt.toFixed(0)} ms)`);
  t.ok(await until(() => hub.results().length >= 1, 5000));
  await new Promise((r) => setTimeout(r, 300));
  t.same(hub.results(), ['long'], 'only the long task ran: nothing given back runs here too');
});

t.test('the hub runs what a worker gave back on another worker, without using an attempt, and stops filling its queue', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  // A raw worker that answers fast until told to hold: then it keeps its running task and gives
  // its queued ones back after 50 ms, as an agent does behind a long task.
  const a = await RawWorker.connect(addr);
  t.equal((await a.handshake({ worker_id: 'a', slots: 1, queue: 4, driver: 'echo' }))?.type, 'HANDSHAKE_ACK');
  let hold = false, outstanding = 0, mostAfterRefusal = 0, refused = false;
  const got: string[] = [];
  let seen = 0;
  const poll = setInterval(() => {
    for (; seen < a.frames.length; seen++) {
      const f = a.frames[seen]!;
      if (f.type !== 'TASK_REQ') continue;
      outstanding++;
      if (refused) mostAfterRefusal = Math.max(mostAfterRefusal, outstanding);
      got.push(f.payload.task_id);
      if (!hold) {
        outstanding--;
        a.send('TASK_RES', { task_id: f.payload.task_id, text: 'a', done: true, seq: 0, receipt: { duration_ms: 0.1 } }, { re: f.id });
      } else if (got.length > 1 + warm) {
        setTimeout(() => { outstanding--; refused = true; a.send('ERROR', { code: 'SWARM_ERR_SLOTS_FULL', msg: 'given back', task_id: f.payload.task_id }, { re: f.id }); }, 50);
      }
    }
  }, 1);
  t.teardown(() => { clearInterval(poll); a.destroy(); });
  const warm = 10;
  await hub.submit(Array.from({ length: warm }, (_, i) => ({ prompt: 'w', id: `warm-${i}` })));
  t.ok(await waitTasks(hub, warm, 5000));
  hold = true;
  const n = 5;
  await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: 'x', id: `job-${i}` })));
  t.ok(await until(() => refused, 5000), 'worker a gave tasks back');
  const b = startPool(addr, 1, { prefix: 'b' });
  t.teardown(() => b.stop());
  t.ok(await waitWorkers(hub, 2));
  t.ok(await until(() => hub.store.queue.counts().done === warm + n - 1, 10_000), 'everything but a\'s running task finished');
  const held = got[warm]!;
  for (let i = 0; i < n; i++) {
    const rec = hub.store.queue.get(`job-${i}`)!;
    if (rec.id === held) { t.equal(rec.state, 'leased', 'a still runs its long task'); continue; }
    t.equal(rec.state, 'done');
    t.equal(rec.attempts, 1, `${rec.id}: one attempt (giving back used none)`);
    t.equal(rec.result?.worker, 'b-1', `${rec.id}: run by the other worker`);
  }
  t.equal(mostAfterRefusal, 0, 'after giving back, a got no new task: it is held to its slot, which its long task fills');
  t.equal(hub.metrics.duplicateResults, 0);
});

t.test('a task goes to a free slot before any worker\'s queue', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  const a = await RawWorker.connect(addr);
  t.equal((await a.handshake({ worker_id: 'a', slots: 1, queue: 4, driver: 'echo' }))?.type, 'HANDSHAKE_ACK');
  // a proves its tasks short, then keeps the next one: busy, with four queue places the hub may fill.
  let hold = false;
  let seen = 0;
  const poll = setInterval(() => {
    for (; seen < a.frames.length; seen++) {
      const f = a.frames[seen]!;
      if (f.type === 'TASK_REQ' && !hold) a.send('TASK_RES', { task_id: f.payload.task_id, text: 'a', done: true, seq: 0, receipt: { duration_ms: 0.1 } }, { re: f.id });
    }
  }, 1);
  t.teardown(() => { clearInterval(poll); a.destroy(); });
  await hub.submit(Array.from({ length: 5 }, (_, i) => ({ prompt: 'w', id: `warm-${i}` })));
  t.ok(await waitTasks(hub, 5, 5000));
  hold = true;
  await hub.submit([{ prompt: 'long', id: 'long' }]);
  t.ok(await until(() => hub.store.queue.get('long')?.state === 'leased', 5000));
  const b = await RawWorker.connect(addr);
  t.equal((await b.handshake({ worker_id: 'b', slots: 1, queue: 4, driver: 'echo' }))?.type, 'HANDSHAKE_ACK');
  t.teardown(() => b.destroy());
  await hub.submit([{ prompt: 'next', id: 'next' }]);
  t.ok(await until(() => hub.store.queue.get('next')?.state === 'leased', 5000));
  t.equal(hub.store.queue.get('next')!.worker, 'b', 'the idle worker got it, not the busy one\'s queue');
});

t.test('the hub tops a worker\'s queue up in batches: nothing after one answer, the missing places after half the queue', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  const a = await RawWorker.connect(addr);
  t.teardown(() => a.destroy());
  t.equal((await a.handshake({ worker_id: 'a', slots: 1, queue: 4, driver: 'echo' }))?.type, 'HANDSHAKE_ACK');
  const reqs = () => a.frames.filter((f) => f.type === 'TASK_REQ');
  const answer = (f: Frame) => a.send('TASK_RES', { task_id: f.payload.task_id, text: 'a', done: true, seq: 0, receipt: { duration_ms: 0.1 } }, { re: f.id });
  const settle = () => new Promise((r) => setTimeout(r, 100));
  await hub.submit(Array.from({ length: 40 }, (_, i) => ({ prompt: 'x', id: `t-${i}` })));
  t.ok(await until(() => reqs().length === 1, 5000), 'no run time known yet: one task, for its one slot');
  answer(reqs()[0]!);
  t.ok(await until(() => reqs().length === 6, 5000), 'short: its slot and its four queue places are filled at once');
  await settle();
  t.equal(reqs().length, 6, 'and no more');
  answer(reqs()[1]!);
  await settle();
  t.equal(reqs().length, 6, 'one answer (4 of 5 held): no task sent yet');
  answer(reqs()[2]!);
  t.ok(await until(() => reqs().length === 8, 5000), 'two answers (3 of 5 held, half the queue): the two missing places are filled together');
  await settle();
  t.equal(reqs().length, 8, 'and no more');
  for (const f of reqs().slice(3)) answer(f);
  t.ok(await until(() => reqs().length === 13, 5000), 'all five answered: five more');
  t.equal(hub.metrics.duplicateResults, 0);
  t.equal(hub.store.queue.counts().done, 8, 'each answer recorded once');
});
