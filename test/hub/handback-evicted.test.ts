import t from 'tap';
import { tempDir } from '../helpers/cli.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';

/**
 * A worker's replica keeps results the hub recorded and has since evicted past its retention horizon.
 * After a hub restart every agent offers them: the hub must know them by id (its remembered ids) and
 * ask for none, and entries for them must record nothing and bring nothing back as work.
 */

const N = 2000;

t.test('a handback offer of evicted ids wants none of them; their entries are duplicates by id, not work', async (t) => {
  const { hub, addr, stop } = await startHub({ retainCount: 10, stateDir: tempDir(t) });
  t.teardown(stop);
  const ids = Array.from({ length: N }, (_, i) => `ev-${i}`);
  await hub.store.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  for (;;) {
    const rec = hub.store.lease({ id: 'gone', caps: [] });
    if (!rec) break;
    await hub.store.complete(rec.id, { text: `answer ${rec.id}`, worker: 'gone', attempt: rec.attempts });
  }
  await hub.store.evict();
  t.equal(hub.store.queue.counts().done, 10, 'all but the horizon left the hot state');

  const w = await RawWorker.connect(addr);
  t.teardown(() => w.destroy());
  const ack = await w.handshake({ worker_id: 'hb-1', slots: 1, peer_addr: '127.0.0.1:9' });
  t.equal(ack?.type, 'HANDSHAKE_ACK');
  const ask = async (payload: unknown): Promise<Frame> => { const m = w.send('HANDBACK', payload); return w.next((f) => f.re === m, 30_000); };

  const offered = [...ids, 'ev-new'];
  const r = await ask({ entries: [], offer: offered });
  t.same(r?.payload.want, ['ev-new'], 'only the id the hub never saw is wanted');

  // A worker that hands back without offering first (or an older one): every entry is known by id.
  const entries = ids.slice(0, 500).map((id) => ({ id, spec: { id, prompt: `prompt ${id}` }, seq: 1, result: { worker: 'hb-1', attempt: 1, text: `other ${id}` } }));
  const m = await ask({ entries });
  t.equal(m?.type, 'ACK', JSON.stringify(m?.payload));
  t.equal(m?.payload.recorded, 0, 'nothing recorded');
  t.equal(m?.payload.duplicate, 500, 'every entry a duplicate');
  t.equal(hub.failover.stats.known, 500, 'known by id, before any check');
  const c = hub.store.queue.counts();
  t.equal(c.queued + c.leased, 0, 'no evicted id came back as work');
  t.equal(hub.store.lookup('ev-0')?.result?.text, 'answer ev-0', 'the recorded result stands (read from the archive)');
});
