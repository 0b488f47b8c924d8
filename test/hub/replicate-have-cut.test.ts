import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { tempDir } from '../helpers/cli.js';
import { FaultNet } from '../helpers/fault-proxy.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * The hub goes down in the middle of a new holder's first whole-state sync, and comes back (another
 * process: it numbers its tasks anew as it replays them). The holder reports what it holds and, by
 * task id, where the part of the sync it has ends; the restarted hub compares the digest without the
 * tasks past that edge and sends those, and leaves out the finished tasks the holder has. Without
 * the edge every bucket of a partial copy differed and the whole state went again. The tasks need a
 * role the holder lacks, so what goes down its link is replication.
 */

const N = 6000;
const OPEN = 200;
const pad = 'c'.repeat(600);

t.test('a holder cut mid-sync by a hub restart gets the part it lacks, not the whole state', async (t) => {
  const dir = tempDir(t);
  // The holder hears nothing while its link is stalled: it keeps the link until the hub goes.
  const first = await startHub({ stateDir: dir, deadAfterMs: 300_000 });
  const net = new FaultNet();
  const proxy = await net.wrap(`${first.addr.host}:${first.addr.port}`);
  let addr = { host: proxy.slice(0, proxy.lastIndexOf(':')), port: Number(proxy.slice(proxy.lastIndexOf(':') + 1)) };
  let open: () => void = () => {};
  let gate = Promise.resolve();
  const ids = Array.from({ length: N }, (_, i) => `hc-${i}`);
  await first.hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  for (let k = 0; k < N - OPEN; k++) {
    const rec = first.hub.store.lease({ id: 'ghost', role: 'x', caps: [] });
    if (!rec) break;
    await first.hub.store.complete(rec.id, { text: `echo: ${rec.spec.prompt}`, worker: 'ghost', attempt: rec.attempts });
  }
  let state = 0;
  for (const rec of first.hub.store.queue.all()) state += JSON.stringify(first.hub.failover.entry(rec, true)).length;
  net.pauseAfter(proxy, Math.floor(state * 0.5));

  const pool = new WorkerPool({ ids: ['hc-w1'], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => { await gate; return addr; }, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  let second: Awaited<ReturnType<typeof startHub>> | undefined;
  t.teardown(async () => { await pool.stop('test over'); await running; await net.close(); await second?.stop(); });
  t.ok(await waitWorkers(first.hub, 1), 'the holder joined');
  t.ok(await until(() => net.isPaused(), 60_000), 'the holder stopped reading mid-sync');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  // What reached it before the stall (the proxy passes half the state), then the hub goes.
  await new Promise((r) => setTimeout(r, 500));
  gate = new Promise<void>((r) => { open = r; });
  await first.hub.stop({ killWorkers: false });
  const had = replica()?.counts().done ?? 0;
  t.ok(had > 0 && had < N - OPEN, `the holder has part of the state: ${had} of ${N - OPEN} finished tasks`);

  second = await startHub({ stateDir: dir });
  addr = second.addr;
  const hub = second.hub;
  open();
  t.ok(await waitWorkers(hub, 1), 'the holder rejoined the restarted hub');
  const agree = () => { const r = replica(); return !!r && ids.every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  t.ok(await until(agree, 90_000), `the holder's copy equals the restarted hub's state (${replica()?.counts().done} done)`);
  const s = hub.failover.stats;
  t.equal(s.haveSyncs, 1, 'one sync from what the holder reported');
  // Most buckets hold both tasks it has and tasks past its edge: those past the edge stay out of the comparison.
  t.ok(s.haveSame >= s.haveBuckets * 0.9, `buckets that matched: ${s.haveSame} of ${s.haveBuckets}`);
  t.ok(s.haveHeld >= had * 0.8, `finished tasks left out as held: ${s.haveHeld} (it had ${had}); sent: ${s.haveSent}`);
  t.equal(hub.store.queue.counts().done, N - OPEN, 'every finished task recorded once, none lost');
  t.equal(ids.filter((id) => { const r = replica()?.get(id)?.result; return hub.store.queue.get(id)?.state === 'done' && r?.text !== `echo: ${pad} ${id}`; }).length, 0, 'changed 0: the copy holds each result as recorded');
});
