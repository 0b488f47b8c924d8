import t from 'tap';
import { Dispatcher } from '../../hub/dispatcher.js';
import { WorkerEntry } from '../../hub/worker-entry.js';
import type { DispatchDeps } from '../../hub/context.js';
import type { TaskRecord } from '../../hub/task.js';
import type { Connection } from '../../protocol/index.js';

/** A link that records what the dispatcher does to it, in order. */
function link(log: string[], name: string): Connection {
  let n = 0;
  return {
    writable: true,
    send: (type: string) => { log.push(`${name} ${type}`); return `${name}-${++n}`; },
    flush: () => { log.push(`${name} flush`); },
  } as unknown as Connection;
}

t.test('a dispatch pass puts its TASK_REQs on the wire at its end, one flush per link however many it leased', async (t) => {
  const log: string[] = [];
  const tasks: TaskRecord[] = ['a', 'b', 'c'].map((id) => ({ id, spec: { id, prompt: `p-${id}` }, attempts: 1 }) as unknown as TaskRecord);
  const deps: DispatchDeps = {
    store: { lease: () => tasks.shift(), peek: () => tasks[0], queue: { nextReadyAt: () => undefined } } as unknown as DispatchDeps['store'],
    registry: { all: () => ([] as WorkerEntry[]).values() },
    metrics: { dispatched: () => {}, leasedQueued: 0 },
    isStopping: false,
    watchers: 0,
    config: { leaseAheadMs: 0 },
  };
  const d = new Dispatcher(deps);
  const w1 = new WorkerEntry({ id: 'w1', role: '', driver: 'echo', caps: [], slots: 2, conn: link(log, 'w1'), session: 's1' });
  const w2 = new WorkerEntry({ id: 'w2', role: '', driver: 'echo', caps: [], slots: 1, conn: link(log, 'w2'), session: 's2' });
  d.offer(w1);
  d.offer(w2);
  await new Promise((r) => setImmediate(r));
  t.same(log.filter((x) => x.endsWith('TASK_REQ')).length, 3, 'three leases');
  t.same(log.filter((x) => x.endsWith('flush')).sort(), ['w1 flush', 'w2 flush'], 'each link flushed once');
  const lastSend = Math.max(...log.map((x, i) => (x.endsWith('TASK_REQ') ? i : -1)));
  t.ok(log.findIndex((x) => x.endsWith('flush')) > lastSend, 'after the last lease of the pass, in the same pass');
  log.length = 0;
  d.schedule();
  await new Promise((r) => setImmediate(r));
  t.same(log, [], 'a pass that leases nothing flushes nothing');
});
