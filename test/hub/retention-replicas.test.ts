import t from 'tap';
import { startHub } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { Replica, type Entry } from '../../worker/gossip/replica.js';
import { tempDir } from '../helpers/cli.js';

t.test('the retention horizon reaches the replica holders: evicted tasks leave their replicas too', async (t) => {
  const { hub, addr, stop } = await startHub({ stateDir: tempDir(t), retainCount: 2, heartbeatMs: 200, deadAfterMs: 60_000 });
  const h = await RawWorker.connect(addr);
  t.teardown(async () => { h.destroy(); await stop(); });
  t.equal((await h.handshake({ worker_id: 'h-1', role: 'holder', peer_addr: '127.0.0.1:9' }))?.type, 'HANDSHAKE_ACK');
  const replica = new Replica();
  // The store's own retention pass (once a second) may evict before the test's evict() does: what the
  // holder was sent is tracked, not only what it holds at the end.
  const sawDone = new Set<string>();
  const forgotten = new Set<string>();
  let seen = 0;
  const drain = () => {
    for (; seen < h.frames.length; seen++) {
      const f = h.frames[seen]!;
      if (f.type !== 'STATE') continue;
      for (const e of f.payload.entries as Entry[]) { replica.merge(e); if (replica.state(e.id) === 'done') sawDone.add(e.id); }
      const ev = f.payload.evicted as string[] | undefined;
      if (ev) { replica.forget(ev); for (const id of ev) forgotten.add(id); }
    }
  };
  const until = async (ok: () => boolean) => {
    const deadline = Date.now() + 5000;
    for (;;) {
      drain();
      if (ok()) return true;
      if (Date.now() > deadline) return false;
      await h.next((f) => h.frames.indexOf(f) >= seen, 200);
    }
  };

  const ids = ['a', 'b', 'c', 'd', 'e'];
  // A role no connected worker has: only the test leases them.
  await hub.submit(ids.map((id) => ({ id, prompt: id, role: 'r' })));
  for (const id of ids) {
    const rec = hub.store.lease({ id: 'ghost', role: 'r', caps: [] })!;
    await hub.store.complete(rec.id, { text: `done ${rec.id}`, worker: 'ghost', attempt: 1 });
  }
  // A result the store's pass evicted first may reach the holder only as its eviction (the archive has it).
  t.ok(await until(() => ids.every((id) => sawDone.has(id) || forgotten.has(id))), 'the holder got every result, or its eviction');
  await hub.store.evict();
  t.ok(await until(() => replica.size === 2), 'the holder dropped the three evicted tasks');
  t.same([...forgotten].sort(), ['a', 'b', 'c'], 'three past the count horizon were evicted from it, the oldest');
  t.same(['d', 'e'].map((id) => replica.state(id)), ['done', 'done'], 'and kept the hot ones');
  t.notOk(replica.merge({ id: 'a', spec: { id: 'a', prompt: 'a', priority: 0 }, result: { worker: 'p', attempt: 1, text: 'old copy' } } as Entry), 'a peer\'s finished copy of an evicted task is not merged back');
  t.equal(replica.counts().done, 2);
});
