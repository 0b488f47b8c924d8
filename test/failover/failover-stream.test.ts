import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';

/**
 * A failover worker streams its answer to the hub as it is generated (as any worker does), and the
 * whole answer is in its replica before the final frame reports it: the hub's assembled answer and
 * the replica's are the same text.
 */
t.test('a failover worker streams chunks; the hub and the replica hold the same whole answer', async (t) => {
  const { hub, addr, stop } = await startHub();
  hub.watchers = 1; // as a dashboard would: workers send partial answers only while someone watches
  const pool = new WorkerPool({
    ids: ['fs-1'], driver: { name: 'echo', options: { token_ms: '30' } }, locate: async () => addr,
    failover: { host: '127.0.0.1', port: 0 },
  }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; await stop(); });
  t.ok(await waitWorkers(hub, 1), 'the failover worker joined');
  const prompt = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
  await hub.submit([{ id: 's-1', prompt }]);
  let partial = 0;
  const streaming = await new Promise<boolean>((resolve) => {
    const end = Date.now() + 20_000;
    const look = () => {
      partial = hub.registry.get('fs-1')?.inflight.get('s-1')?.answer.bytes ?? 0;
      if (partial > 0 && hub.store.queue.get('s-1')?.state !== 'done') return resolve(true);
      if (Date.now() > end || hub.store.queue.get('s-1')?.state === 'done') return resolve(false);
      setTimeout(look, 5);
    };
    look();
  });
  t.ok(streaming, `the hub held ${partial} bytes of a partial answer before the task was done`);
  const until = Date.now() + 20_000;
  while (hub.store.queue.get('s-1')?.state !== 'done' && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  const text = hub.store.queue.get('s-1')?.result?.text;
  t.equal(text, `echo: ${prompt}`, 'the hub recorded the whole answer');
  t.equal(pool.agents[0]!.failover?.node.replica.get('s-1')?.result?.text, text, 'the replica holds the same answer');
  t.equal(hub.metrics.duplicateResults, 0, 'recorded once');
});
