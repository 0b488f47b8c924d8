import t from 'tap';
import { DEFAULT_KEEPERS } from '../../hub/replicate-keepers.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { until } from '../helpers/wait.js';

/**
 * Keepers of the open tasks are capped: of the processes without a replica holder, only the lowest
 * `DEFAULT_KEEPERS` keep a copy of the open work (each copy is every open task's spec, decoded again
 * for every new task). When a keeper leaves, the next process takes its place, with the open tasks.
 * Each raw worker here is its own process (no pid).
 */

const OPEN = 500;
const JOINERS = 8;

t.test('at most DEFAULT_KEEPERS processes keep the open tasks; a keeper that leaves is replaced', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  await hub.submit(Array.from({ length: OPEN }, (_, i) => ({ id: `kc-${i}`, prompt: `prompt ${i} ${'k'.repeat(200)}`, role: 'x' })));
  const ws = new Map<string, RawWorker>();
  t.teardown(() => { for (const w of ws.values()) w.destroy(); });
  for (let i = 1; i <= JOINERS; i++) {
    const w = await RawWorker.connect(addr);
    ws.set(`kw-${i}`, w);
    const ack = await w.handshake({ worker_id: `kw-${i}`, slots: 1, peer_addr: `127.0.0.1:${9100 + i}` });
    t.equal(ack?.type, 'HANDSHAKE_ACK', `kw-${i} joined`);
  }
  t.same(hub.failover.holders(), ['kw-1', 'kw-2', 'kw-3'], 'the lowest ids hold the state');
  // Open tasks a worker was sent by a sync without a holder's mark: a keeper's.
  const kept = (id: string) => ws.get(id)!.frames.filter((f: Frame) => f.type === 'STATE' && f.payload.full && !f.payload.sync).reduce((n: number, f: Frame) => n + f.payload.entries.length, 0);
  t.equal(DEFAULT_KEEPERS, 2, 'two keepers by default');
  t.same(hub.failover.keeperIds(), ['kw-4', 'kw-5'], 'the two lowest of the other processes keep the open tasks');
  t.ok(await until(() => kept('kw-4') === OPEN && kept('kw-5') === OPEN, 30_000), `each keeper has every open task (${kept('kw-4')}, ${kept('kw-5')})`);
  for (const id of ['kw-6', 'kw-7', 'kw-8']) t.equal(kept(id), 0, `${id} keeps no copy`);
  const views = hub.failover.feedViews();
  t.same(views.filter((v) => v.keeper).map((v) => v.holder), ['kw-4', 'kw-5'], 'status shows the keepers\' feeds, marked as keepers');
  t.ok(views.filter((v) => v.keeper).every((v) => v.syncs === 1 && v.synced === OPEN), 'each synced the open tasks once');
  t.same(views.filter((v) => !v.keeper).map((v) => v.holder).sort(), ['kw-1', 'kw-2', 'kw-3'], 'and the holders\' feeds, unmarked');

  // A keeper's process goes: the next one keeps the open tasks; still two.
  ws.get('kw-4')!.destroy();
  ws.delete('kw-4');
  t.ok(await until(() => hub.failover.keeperIds().join() === 'kw-5,kw-6', 30_000), `the next process takes its place (${hub.failover.keeperIds().join(', ')})`);
  t.ok(await until(() => kept('kw-6') === OPEN, 30_000), `and gets every open task (${kept('kw-6')})`);
  for (const id of ['kw-7', 'kw-8']) t.equal(kept(id), 0, `${id} still keeps none`);
  t.equal(hub.store.queue.counts().queued, OPEN, 'every acknowledged task is still there: lost 0');
});
