import t, { type Test } from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';

/** Run one echo task (a chunk every 20 ms) and watch what the hub holds of its answer meanwhile. */
async function run(t: Test, watchers: number): Promise<{ partialSeen: boolean; text: string; expected: string }> {
  const { hub, addr, stop } = await startHub();
  hub.watchers = watchers;
  const pool = new WorkerPool({ ids: ['p-1'], driver: { name: 'echo', options: { token_ms: '20' } }, locate: async () => addr }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; await stop(); });
  t.ok(await waitWorkers(hub, 1));
  const prompt = Array.from({ length: 25 }, (_, i) => `w${i}`).join(' ');
  await hub.submit([{ id: 'x-1', prompt }]);
  let partialSeen = false;
  const end = Date.now() + 30_000;
  while (hub.store.queue.get('x-1')?.state !== 'done' && Date.now() < end) {
    if ((hub.registry.get('p-1')?.inflight.get('x-1')?.answer.bytes ?? 0) > 0) partialSeen = true;
    await new Promise((r) => setTimeout(r, 5));
  }
  const rec = hub.store.queue.get('x-1')!;
  return { partialSeen, text: rec.result?.text ?? '', expected: `echo: ${prompt}` };
}

t.test('with nobody watching, a worker sends its answer whole at the end, no partials', async (t) => {
  const r = await run(t, 0);
  t.notOk(r.partialSeen, 'the hub held no partial answer');
  t.equal(r.text, r.expected, 'the whole answer was recorded');
});

t.test('with a dashboard open, partials stream (coalesced) and add up to the answer', async (t) => {
  const r = await run(t, 1);
  t.ok(r.partialSeen, 'the hub held a partial answer before the end');
  t.equal(r.text, r.expected);
});
