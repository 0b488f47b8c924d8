import t from 'tap';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { startHub, waitTasks } from '../helpers/inproc.js';

/**
 * Lease-ahead on the worker's word: a worker with the cap `ends-soon` is told the hub's lead in its
 * HANDSHAKE_ACK and says (HEARTBEAT `ending`) when a running task is about to end; the hub then leases
 * it one task into its queue, never more, and never by guessing from its run times.
 */

const reqs = (w: RawWorker): Frame[] => w.frames.filter((f) => f.type === 'TASK_REQ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function joined(addr: { host: string; port: number }, id: string, caps: string[]): Promise<{ w: RawWorker; ack: Frame }> {
  const w = await RawWorker.connect(addr);
  const ack = await w.handshake({ worker_id: id, slots: 1, queue: 4, caps });
  return { w, ack };
}

function answer(w: RawWorker, f: Frame): void {
  w.send('TASK_RES', { task_id: f.payload.task_id, text: 'ok', done: true, seq: 0, receipt: { duration_ms: 200 } }, { re: f.id });
}

t.test('a worker that says a task ends soon gets one task ahead then, and only one however often it says so', async (t) => {
  const { hub, addr, stop } = await startHub({});
  t.teardown(stop);
  const { w, ack } = await joined(addr, 'says', ['ends-soon']);
  t.teardown(() => w.destroy());
  t.equal(ack.payload.config.lease_ahead_ms, 40, 'the ACK gives the hub\'s lead (40 ms by default)');
  await hub.submit(Array.from({ length: 4 }, (_, i) => ({ prompt: `p${i}`, id: `s-${i}` })));
  t.ok(await w.next((f) => f.type === 'TASK_REQ'), 'its first task');
  // Its run times say nothing yet, and it has not said its task ends: its slot only.
  await sleep(300);
  t.equal(reqs(w).length, 1, 'no task ahead before it says so');
  w.send('HEARTBEAT', { load: 1, status: 'busy', ending: true });
  t.ok(await w.next((f) => f.type === 'TASK_REQ' && f.payload.task_id !== reqs(w)[0]!.payload.task_id, 2000), 'a task ahead once it says its task ends soon');
  // Hostile or buggy: saying it again and again leases no more than one place beyond its slot.
  for (let i = 0; i < 20; i++) w.send('HEARTBEAT', { load: 1, status: 'busy', ending: true });
  await sleep(300);
  t.equal(reqs(w).length, 2, 'one task ahead, not more');
  // Its first task ends: the one ahead runs; saying so again brings the next one.
  answer(w, reqs(w)[0]!);
  await sleep(200);
  t.equal(reqs(w).length, 2, 'its queued task now runs: no new lease until it says so');
  w.send('HEARTBEAT', { load: 1, status: 'busy', ending: true });
  t.ok(await w.next((f) => f.type === 'TASK_REQ' && reqs(w).length === 3, 2000), 'the next one ahead');
  // Finish everything, in order: each task recorded once.
  for (let i = 1; i < 4; i++) {
    const f = await w.next((x) => x.type === 'TASK_REQ' && reqs(w).indexOf(x) === i, 3000);
    t.ok(f, `task ${i + 1} leased`);
    answer(w, f);
    if (i < 3) w.send('HEARTBEAT', { load: 1, status: 'busy', ending: true });
  }
  t.ok(await waitTasks(hub, 4, 10_000), 'all finished');
  t.equal(hub.store.queue.counts().done, 4, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.same(Array.from({ length: 4 }, (_, i) => hub.store.queue.get(`s-${i}`)!.attempts), [1, 1, 1, 1], 'one attempt each');
  t.equal(hub.metrics.queuedGivenBack, 0, 'none given back');
  // The word is read for itself alone: status keeps what the periodic beat said.
  w.send('HEARTBEAT', { load: 0, status: 'idle', state: 'IDLE' });
  w.send('HEARTBEAT', { load: 1, status: 'busy', state: 'BUSY', ending: true });
  await sleep(100);
  t.equal(hub.registry.get('says')?.state, 'IDLE', 'a word that a task ends changes nothing else the worker reported');
  // Each lease ahead came at once on the worker's word; counted from its last free slot, it would read
  // as the 200-300 ms its task had run (swarm status's dispatch p50 and p99).
  t.ok(hub.metrics.dispatchLatency.quantile(0.99) < 150, `dispatch latency counted from the word (max ${hub.metrics.dispatchLatency.quantile(0.99).toFixed(1)} ms)`);
});

t.test('without the cap, or with lease-ahead off, a worker\'s word is ignored', async (t) => {
  const { hub, addr, stop } = await startHub({});
  t.teardown(stop);
  const { w, ack } = await joined(addr, 'plain', []);
  t.teardown(() => w.destroy());
  t.equal(ack.payload.config.lease_ahead_ms, undefined, 'no lead for a worker that cannot say (and no guessing by default)');
  await hub.submit(Array.from({ length: 3 }, (_, i) => ({ prompt: `p${i}`, id: `n-${i}` })));
  t.ok(await w.next((f) => f.type === 'TASK_REQ'));
  for (let i = 0; i < 5; i++) w.send('HEARTBEAT', { load: 1, status: 'busy', ending: true });
  await sleep(300);
  t.equal(reqs(w).length, 1, 'its slot only');

  const off = await startHub({ leaseAheadMs: 0 });
  t.teardown(off.stop);
  const o = await joined(off.addr, 'off', ['ends-soon']);
  t.teardown(() => o.w.destroy());
  t.equal(o.ack.payload.config.lease_ahead_ms, undefined, 'lease-ahead off: no lead');
  await off.hub.submit(Array.from({ length: 3 }, (_, i) => ({ prompt: `p${i}`, id: `o-${i}` })));
  t.ok(await o.w.next((f) => f.type === 'TASK_REQ'));
  for (let i = 0; i < 5; i++) o.w.send('HEARTBEAT', { load: 1, status: 'busy', ending: true });
  await sleep(300);
  t.equal(reqs(o.w).length, 1, 'its slot only');
  t.equal(hub.metrics.leasedQueued + off.hub.metrics.leasedQueued, 0, 'nothing leased ahead');
});
