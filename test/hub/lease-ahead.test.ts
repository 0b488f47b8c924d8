import t from 'tap';
import { WorkerEntry } from '../../hub/worker-entry.js';
import { workerConfig } from '../../worker/config.js';
import type { Connection } from '../../protocol/index.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { startHub, startPool, waitTasks } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * Lease-ahead (`leaseAheadMs`): a busy worker whose running task nears its expected end is leased its
 * next task into its queue, so it starts it in the turn the last one ends. A task leased ahead and not
 * started goes back when the worker's hold expires or the worker dies: nothing lost, nothing twice.
 */

const conn = { writable: true } as unknown as Connection;
const entry = (o: { queue?: number; slots?: number; ahead?: number } = {}) =>
  new WorkerEntry({ id: 'w', role: '', driver: 'echo', caps: [], slots: o.slots ?? 1, conn, session: 's', queue: o.queue ?? 8, prefetchBelowMs: 5, leaseAheadMs: o.ahead ?? 30 });

t.test('a busy worker may take one task ahead once its running one is within leaseAheadMs of its mean run time', async (t) => {
  const w = entry();
  const now = performance.now();
  w.leased('a', 'r1', now);
  t.equal(w.aheadAt(), undefined, 'no run time known yet');
  for (let i = 0; i < 20; i++) w.ran(200);
  t.ok(Math.abs(w.aheadAt()! - (now + 200 - 30)) < 1, 'due 30 ms before the expected end');
  t.equal(w.capacity, 1, 'not yet due: its slot only');
  w.release('a');
  w.leased('b', 'r2', now - 190);
  t.equal(w.capacity, 2, 'due: one place of its queue');
  w.leased('c', 'r3', now);
  t.equal([...w.inflight.values()].filter((l) => l.startedAt === undefined).length, 1, 'counted as leased ahead');
  t.equal(w.aheadAt(), undefined, 'a task already waits: no second one');
  t.equal(w.inflight.get('c')!.startedAt, undefined, 'waiting in its queue');
  w.release('b', now + 5);
  t.equal(w.inflight.get('c')!.startedAt, now + 5, 'starts as the slot frees');
  w.refusedQueued();
  t.equal(w.aheadAt(), undefined, 'it gave one back: none until it finishes a task');
  w.ran(200);
  w.release('c');
  w.leased('d', 'r4', now - 190);
  t.equal(w.capacity, 2, 'after a finished task, again');
  t.equal(entry({ ahead: 0 }).aheadAt(), undefined, 'off');
  const short = entry(); short.leased('x', 'r', now - 1000); short.ran(1);
  t.equal(short.aheadAt(), undefined, 'short tasks have the prefetch queue instead');
  t.equal(short.capacity, 9);
  const noQueue = entry({ queue: 0 }); noQueue.leased('x', 'r', now - 1000); noQueue.ran(200);
  t.equal(noQueue.aheadAt(), undefined, 'a worker without a queue');
});

t.test('with lease-ahead, agents take their next task ahead and every task is recorded once', async (t) => {
  const { hub, addr, stop } = await startHub({ leaseAheadMs: 40, leaseAheadByMean: true });
  t.teardown(stop);
  // About 8 words of 15 ms: tasks of ~120 ms, one slot each, more tasks than agents.
  const pool = startPool(addr, 2, { driver: 'echo', options: { token_ms: '15' } });
  t.teardown(() => pool.stop());
  const n = 24;
  await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: `one two three four five six seven ${i}`, id: `a-${i}` })));
  t.ok(await waitTasks(hub, n, 60_000), 'all finished');
  const c = hub.store.queue.counts();
  t.equal(c.done, n, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.ok(hub.metrics.leasedQueued > 0, `tasks were leased ahead (${hub.metrics.leasedQueued} leased ahead, ${hub.metrics.queuedGivenBack} given back)`);
});

t.test('tasks leased ahead that the worker cannot start within its hold go back without using an attempt', async (t) => {
  // Leased 300 ms before the expected end, held at most 5 ms: nearly every task leased ahead is given back.
  const { hub, addr, stop } = await startHub({ leaseAheadMs: 300, leaseAheadByMean: true });
  t.teardown(stop);
  const pool = startPool(addr, 2, { driver: 'echo', options: { token_ms: '60' }, config: workerConfig({ agent: { queueHoldMs: 5 } }) });
  t.teardown(() => pool.stop());
  const n = 12;
  await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: `one two three four five six seven ${i}`, id: `h-${i}` })));
  t.ok(await waitTasks(hub, n, 60_000), 'all finished');
  t.equal(hub.store.queue.counts().done, n, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.ok(hub.metrics.queuedGivenBack > 0, 'some were given back');
  t.ok(hub.metrics.queuedGivenBack > 0 && hub.metrics.leasedQueued >= hub.metrics.queuedGivenBack, 'and counted (swarm status, /metrics)');
  const attempts = Array.from({ length: n }, (_, i) => hub.store.queue.get(`h-${i}`)!.attempts);
  t.same(attempts.filter((a) => a !== 1), [], 'each task used one attempt');
});

t.test('a worker that dies holding a task leased ahead: it runs elsewhere, once, without using an attempt', async (t) => {
  const { hub, addr, stop } = await startHub({ leaseAheadMs: 60, leaseAheadByMean: true });
  t.teardown(stop);
  // A raw worker that answers its tasks in 80 ms until it holds one ahead, then vanishes.
  const raw = await RawWorker.connect(addr);
  await raw.handshake({ worker_id: 'raw', slots: 1, queue: 4, driver: 'echo' });
  const answered = new Set<string>();
  let busy = false;
  const backlog: Frame[] = [];
  let seen = 0;
  let died: string[] | undefined;
  const poll = setInterval(() => {
    for (; seen < raw.frames.length; seen++) { const f = raw.frames[seen]!; if (f.type === 'TASK_REQ') backlog.push(f); }
    if (died) return;
    if (busy && backlog.length >= 2) { died = backlog.map((f) => f.payload.task_id as string); raw.destroy(); clearInterval(poll); return; }
    if (busy || !backlog.length) return;
    busy = true;
    const f = backlog[0]!;
    setTimeout(() => {
      if (died) return;
      backlog.shift();
      answered.add(f.payload.task_id as string);
      raw.send('TASK_RES', { task_id: f.payload.task_id, text: 'ok', done: true, seq: 0, receipt: { duration_ms: 80 } }, { re: f.id });
      busy = false;
    }, 80);
  }, 1);
  t.teardown(() => { clearInterval(poll); raw.destroy(); });
  const n = 10;
  await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: `p${i}`, id: `d-${i}` })));
  t.ok(await until(() => died !== undefined, 20_000), 'the raw worker took a task ahead and died');
  const pool = startPool(addr, 1, { driver: 'echo' });
  t.teardown(() => pool.stop());
  t.ok(await waitTasks(hub, n, 30_000), 'all finished');
  t.equal(hub.store.queue.counts().done, n, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  for (const id of died!) t.notOk(answered.has(id), `${id} was not answered by the dead worker`);
  const ahead = died![died!.length - 1]!;
  t.equal(hub.store.queue.get(ahead)!.attempts, 1, 'the task it held ahead used no attempt there');
});
