import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { FaultNet } from '../helpers/fault-proxy.js';
import { finishAsGhost, quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * A holder's link is cut in the middle of its whole-state sync. On reconnect it tells the hub how far
 * its copy went; the same hub sends what changed since and the rest of the sync, not the whole state
 * again. Tasks finish meanwhile (the copy must end equal to the hub's). The tasks need a role the
 * holder lacks, so what goes down its link is replication, and the test finishes them itself.
 */

const N = 4000;
const RUN = 200;
const pad = 'r'.repeat(2000);

t.test('a whole-state sync cut mid-way resumes on reconnect: the rest is sent, not the whole state again', async (t) => {
  const { hub, addr, stop } = await startHub();
  const net = new FaultNet();
  const proxy = await net.wrap(`${addr.host}:${addr.port}`);
  const [host, port] = [proxy.slice(0, proxy.lastIndexOf(':')), Number(proxy.slice(proxy.lastIndexOf(':') + 1))];
  const ids = Array.from({ length: N }, (_, i) => `rs-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  // The whole state as a full sync sends it (JSON characters of its entries).
  let state = 0;
  for (const rec of hub.store.queue.all()) state += JSON.stringify(hub.failover.entry(rec, true)).length;
  // Cut the first link once it has carried about half the state.
  const cutAt = Math.floor(state * 0.5);
  net.severAfter(proxy, cutAt);

  const pool = new WorkerPool({ ids: ['rs-w1'], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => ({ host, port }), failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await net.close(); await stop(); });
  t.ok(await waitWorkers(hub, 1), 'the holder joined');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  // Tasks finish while the sync goes, through the cut and the resumed sync: 20 every 50 ms.
  let ran = 0;
  const runner = (async () => {
    while (ran < RUN) {
      ran += (await finishAsGhost(hub, 20)).length;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  // It reconnects after the cut, and the hub finishes its sync where the cut left it.
  t.ok(await until(() => hub.failover.stats.resumedSyncs >= 1, 60_000), 'the sync resumed after the cut');
  await runner;
  const agree = () => { const r = replica(); return !!r && ids.every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  t.ok(await until(agree, 60_000), `the holder's copy equals the hub's state (${replica()?.counts().done} done of ${RUN})`);
  const sent = net.down(proxy);
  t.ok(sent < state * 1.3, `bytes to the holder over both links: ${sent}, the state ${state}, cut at ${cutAt}: not the whole state again`);
  t.equal(hub.failover.stats.fullSyncs, 1, 'one full sync (the first), then a resumed one');
  const done = ids.filter((id) => hub.store.queue.get(id)?.state === 'done');
  t.equal(done.length, RUN, 'every finished task is recorded once, none lost');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  t.equal(done.filter((id) => replica()?.get(id)?.result?.text !== `echo: ${pad} ${id}`).length, 0, 'changed 0: the copy holds each result as recorded');
});
