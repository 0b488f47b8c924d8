import t from 'tap';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/**
 * After a gossip period the agents rejoin a restarted hub and hand back while the first tasks run;
 * the holders' syncs (a comparison over the hot state, an exchange, the sync) wait until the swarm is
 * back in star mode, then each settled holder gets the whole state, once.
 */

const TASKS = 1000;

t.test('holder syncs wait while a member is still in gossip mode, then each holder gets the whole state', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  await hub.submit(Array.from({ length: TASKS }, (_, i) => ({ id: `sw-${i}`, prompt: `prompt ${i} ${'x'.repeat(100)}` })));
  const ws: RawWorker[] = [];
  t.teardown(() => { for (const w of ws) w.destroy(); });
  for (let i = 1; i <= 4; i++) {
    const w = await RawWorker.connect(addr);
    ws.push(w);
    const ack = await w.handshake({ worker_id: `hw-${i}`, slots: 1, peer_addr: `127.0.0.1:${9100 + i}` });
    t.equal(ack?.type, 'HANDSHAKE_ACK', `hw-${i} joined`);
  }
  // The last one to rejoin still reports gossip mode (its handback not done).
  const late = ws[3]!;
  late.send('HEARTBEAT', { load: 0, status: 'idle', mode: 'gossip', coordinator: 'hw-1', epoch: 1 });
  t.ok(await until(() => hub.failover.mode === 'reconciling', 5000), 'the hub reconciles while a member is in gossip mode');
  const synced = (w: RawWorker) => w.frames.filter((f: Frame) => f.type === 'STATE' && f.payload.full && f.payload.sync).reduce((n: number, f: Frame) => n + f.payload.entries.length, 0);
  // Well past the holder set's settle (300 ms), inside the wait's bound (10 s).
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(hub.failover.stats.fullSyncs, 0, 'no holder sync while the swarm reconciles');
  t.equal(ws.slice(0, 3).reduce((n, w) => n + synced(w), 0), 0, 'no whole-state frame reached a holder');
  late.send('HEARTBEAT', { load: 0, status: 'idle', mode: 'star', coordinator: 'hub', epoch: 0 });
  for (const w of ws.slice(0, 3)) t.ok(await w.next((f) => f.type === 'STATE' && f.payload.full && f.payload.parts !== undefined, 30_000), 'back in star mode: a holder got the last part of its sync');
  t.same(hub.failover.holders(), ['hw-1', 'hw-2', 'hw-3'], 'the lowest ids hold the state');
  t.equal(hub.failover.stats.fullSyncs, 3, 'one sync per holder');
  for (const w of ws.slice(0, 3)) t.equal(synced(w), TASKS, 'each holder has every task');
});
