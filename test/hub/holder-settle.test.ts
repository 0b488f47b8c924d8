import t from 'tap';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';

/**
 * Workers rejoining a restarted hub arrive one by one, and each lower id displaces a holder. A full
 * sync goes to the holders the set settles on, once each: the ones displaced within moments got
 * nothing (every such sync was the whole state, sent while the other workers' handshakes waited).
 */

const TASKS = 3000;
const JOINERS = 9;

t.test('a join storm syncs the settled holders once each, and each has the whole state', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  await hub.submit(Array.from({ length: TASKS }, (_, i) => ({ id: `st-${i}`, prompt: `prompt ${i} ${'x'.repeat(200)}` })));
  const ws: RawWorker[] = [];
  t.teardown(() => { for (const w of ws) w.destroy(); });
  // Highest id first: without the settle, every join is a new holder and gets a full sync.
  for (let i = JOINERS; i >= 1; i--) {
    const w = await RawWorker.connect(addr);
    ws.push(w);
    const ack = await w.handshake({ worker_id: `sw-${i}`, slots: 1, peer_addr: `127.0.0.1:${9000 + i}` });
    t.equal(ack?.type, 'HANDSHAKE_ACK', `sw-${i} joined`);
  }
  t.same(hub.failover.holders(), ['sw-1', 'sw-2', 'sw-3'], 'the lowest ids hold the state');
  // A whole-state sync's frames carry the holder's mark; the others here are keepers of the open tasks
  // (each its own process: hub/replicate-keepers.ts), whose syncs carry none.
  const synced = (w: RawWorker) => w.frames.filter((f: Frame) => f.type === 'STATE' && f.payload.full && f.payload.sync).reduce((n: number, f: Frame) => n + f.payload.entries.length, 0);
  const last = (w: RawWorker) => w.next((f) => f.type === 'STATE' && f.payload.full && f.payload.parts !== undefined, 30_000);
  for (const w of ws.slice(-3)) t.ok(await last(w), 'a holder got the last part of its sync');
  t.equal(hub.failover.stats.fullSyncs, 3, 'three full syncs: one per settled holder');
  for (const w of ws.slice(-3)) t.equal(synced(w), TASKS, 'and each has every task');
  for (const w of ws.slice(0, -3)) t.equal(synced(w), 0, 'a displaced holder got no whole-state sync');
  t.same(hub.failover.keeperIds().sort(), ['sw-4', 'sw-5'], 'the two lowest of the others keep the open tasks (hub/replicate-keepers.ts DEFAULT_KEEPERS)');
});
