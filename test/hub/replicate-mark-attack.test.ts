import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { finishAsGhost, quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/**
 * A hostile holder reconnecting to the same hub with a sync mark (HANDSHAKE `sync`) that names the
 * hub's own generation but positions no holder could have: a version past the hub's, a sync position
 * far below or past every task, the largest integers JSON carries. The hub answers each, keeps its
 * records and keeps an honest holder's copy equal to them.
 */

const N = 600;

t.test('impossible sync marks of the hub\'s own generation cost nobody but the liar', async (t) => {
  const { hub, addr, stop } = await startHub();
  const ids = Array.from({ length: N }, (_, i) => `mk-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: `p ${id}`, role: 'x' })));
  const finish = (n: number) => finishAsGhost(hub, n);
  await finish(N / 2);
  const pool = new WorkerPool({ ids: ['honest'], driver: { name: 'echo', options: {} }, slots: 1, locate: async () => addr, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  const raws: RawWorker[] = [];
  t.teardown(async () => { for (const r of raws) r.destroy(); await pool.stop('test over'); await running; await stop(); });
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const agrees = () => { const r = replica(); return !!r && ids.every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  t.ok(await waitWorkers(hub, 1), 'the honest holder joined');
  t.ok(await until(agrees, 30_000), 'it holds the whole state');

  let k = 0;
  const join = async (sync?: unknown) => {
    const raw = await RawWorker.connect(addr);
    raws.push(raw);
    const id = `mark-${++k}`;
    const reply = await raw.handshake({ worker_id: id, peer_addr: '127.0.0.1:9', host_id: `host-${id}`, pid: 200_000 + k, ...(sync ? { sync } : {}) });
    return { raw, reply };
  };
  // The hub's generation, as any holder learns it from its STATE frames.
  const first = await join();
  const state = await first.raw.next((f) => f.type === 'STATE' && f.payload?.sync?.gen, 20_000);
  const gen = String(state?.payload?.sync?.gen);
  t.ok(gen.length > 0, `the hub's generation: ${gen}`);
  first.raw.destroy();

  const big = Number.MAX_SAFE_INTEGER;
  for (const sync of [{ gen, ver: big }, { gen, ver: 0, seq: -big }, { gen, ver: 0, seq: big }, { gen, ver: 1, seq: 0 }, { gen, ver: big, seq: big }, { gen, ver: -1 }, { gen, ver: 1.5 }, { gen: 'x'.repeat(65), ver: 0 }]) {
    const { raw, reply } = await join(sync);
    t.ok(reply?.type === 'HANDSHAKE_ACK' || (reply?.type === 'ERROR' && /^SWARM_ERR_/.test(reply.payload?.code)), `${JSON.stringify(sync).slice(0, 60)}: ${reply?.type} ${reply?.payload?.code ?? ''}`);
    await finish(20);
    await new Promise((r) => setTimeout(r, 200));
    raw.destroy();
  }
  await finish(N);
  t.equal(hub.store.queue.counts().done, N, 'every task recorded done once');
  t.ok(await until(agrees, 30_000), 'the honest holder still equals the hub');
  t.equal(ids.filter((id) => replica()?.get(id)?.result?.text !== `echo: p ${id}`).length, 0, 'changed 0');
});
