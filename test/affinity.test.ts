import t from 'tap';
import { pickByPrefix, sharedPrefix, MIN_AFFINITY_CHARS } from '../sched/index.js';
import { startHub, startPool, waitTasks, waitWorkers } from './helpers/inproc.js';

const DOC = 'The same long input document that every agent of the topology reads first. ';

t.test('the worker whose last prompt shares the longest start wins; a tie keeps today\'s order', async (t) => {
  t.equal(sharedPrefix('abcdef', 'abcxyz'), 3);
  t.equal(pickByPrefix(DOC + 'q1', [undefined, 'other', DOC + 'q0']), 2, 'the worker that read the document');
  t.equal(pickByPrefix(DOC + 'q1', [DOC + 'q0', DOC + 'q2']), 0, 'tie: the first');
  t.equal(pickByPrefix(DOC + 'q1', ['x', DOC.slice(0, MIN_AFFINITY_CHARS - 1)]), 0, 'too short a start is no reason to move');
  t.equal(pickByPrefix('anything', []), 0);
});

t.test('the hub sends a task to the free worker whose last prompt starts like it', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  const pool = startPool(addr, 3);
  t.teardown(pool.stop);
  t.ok(await waitWorkers(hub, 3));
  // One task each (all three free and idle): each worker now holds a different document.
  const docs = ['alpha document, long enough to matter: ', 'beta document, long enough to matter: ', 'gamma document, long enough to matter: '];
  await hub.submit(docs.map((d, i) => ({ id: `first-${i}`, prompt: d + 'first' })));
  t.ok(await waitTasks(hub, 3));
  const holder = new Map(docs.map((d, i) => [d, hub.store.queue.get(`first-${i}`)!.result!.receipt?.worker]));
  t.equal(new Set(holder.values()).size, 3, 'one document per worker');
  // Follow-ups, one at a time so that every worker is free: each goes to its document's holder.
  for (const [round, d] of [...docs, ...docs.slice().reverse()].entries()) {
    await hub.submit([{ id: `next-${round}`, prompt: d + `question ${round}` }]);
    t.ok(await waitTasks(hub, 4 + round));
    t.equal(hub.store.queue.get(`next-${round}`)!.result!.receipt?.worker, holder.get(d), `${d.split(' ')[0]} follow-up went to its holder`);
  }
});
