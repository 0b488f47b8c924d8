import t from 'tap';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { Replica, type Entry } from '../../worker/gossip/replica.js';
import type { StoreEvent } from '../../hub/store-events.js';

/**
 * The replicator follows the store's events: whatever changes a task (accepted, leased, a lease
 * taken back unrun, a retry, a lapsed lease, a worker leaving, done, failed) reaches the replica
 * holders as a delta at once, without waiting for the periodic repair sync.
 */

t.test('every store event reaches the replica holder as a delta', async (t) => {
  // A short lease, so one lapses while the test watches; a long repair interval, so only deltas can explain what the holder sees.
  const { hub, addr, stop } = await startHub({ leaseMs: 300, heartbeatMs: 200, deadAfterMs: 60_000 });
  const h = await RawWorker.connect(addr);
  t.teardown(async () => { h.destroy(); await stop(); });
  t.equal((await h.handshake({ worker_id: 'h-1', role: 'holder', peer_addr: '127.0.0.1:9' }))?.type, 'HANDSHAKE_ACK');
  t.same(hub.failover.holders(), ['h-1'], 'the peer holds the state');

  // The holder's copy, merged as a worker merges STATE frames.
  const replica = new Replica();
  let seen = 0;
  const drain = () => { for (; seen < h.frames.length; seen++) { const f = h.frames[seen] as Frame; if (f.type === 'STATE') for (const e of f.payload.entries as Entry[]) replica.merge(e); } };
  const events: StoreEvent['type'][] = [];
  hub.store.subscribe((e) => events.push(e.type));
  // A new holder's first full sync starts once the holder set settles: wait for it (bounded).
  for (const end = Date.now() + 5000; !hub.failover.stats.fullSyncs && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
  const fullSyncs = hub.failover.stats.fullSyncs;
  /** Bounded wait until the holder's view of `id` is `state`. */
  const holderSees = async (id: string, state: string) => {
    const deadline = Date.now() + 5000;
    for (;;) {
      drain();
      if (replica.state(id) === state) return true;
      if (Date.now() > deadline) return false;
      await h.next((f) => h.frames.indexOf(f) >= seen, 200);
    }
  };

  // Each task has its own role, which no connected worker has: only the test leases it.
  const roles = ['ra', 'rb', 'rc', 'rd', 're', 'rf'];
  await hub.submit(roles.map((r) => ({ id: `t-${r}`, prompt: r, role: r })));
  for (const r of roles) t.ok(await holderSees(`t-${r}`, 'queued'), `accepted ${r}: the holder has it, queued`);
  t.ok(replica.get('t-ra')?.spec, 'an accepted task reaches the holder with its spec');
  const view = (role: string, id = 'ghost') => ({ id, role, caps: [] as string[] });

  t.equal(hub.store.lease(view('ra'))?.id, 't-ra');
  t.ok(await holderSees('t-ra', 'leased'), 'leased: the holder sees the lease');
  t.ok(hub.store.unlease('t-ra', 'ghost'));
  t.ok(await holderSees('t-ra', 'queued'), 'a lease taken back unrun (unlease) reaches the holder at once');
  t.equal(hub.store.lease(view('ra'))?.id, 't-ra');
  t.ok(await holderSees('t-ra', 'leased'), 'leased again after an unlease: the new lease outranks the revoked one');
  t.same({ ...replica.get('t-ra')?.lease, until: 0 }, { worker: 'ghost', attempt: 2, epoch: 0, until: 0, unrun: 1 }, 'the unrun lease is not counted as an attempt');

  t.equal(hub.store.lease(view('rb'))?.id, 't-rb');
  t.equal(await hub.store.fail('t-rb', 'ghost', { code: 'SWARM_ERR_TASK_FAILED', msg: 'flaky' }, true), 'retry');
  t.ok(await holderSees('t-rb', 'queued'), 'a retry (requeue with backoff) reaches the holder at once');

  t.equal(hub.store.lease(view('rc'))?.id, 't-rc');
  t.ok(await holderSees('t-rc', 'leased'));
  t.ok(await holderSees('t-rc', 'queued'), 'a lapsed lease (the hub\'s clock tick) reaches the holder at once');

  t.equal(hub.store.lease(view('rd', 'gone'))?.id, 't-rd');
  t.ok(await holderSees('t-rd', 'leased'));
  t.equal(hub.store.release('gone').length, 1);
  t.ok(await holderSees('t-rd', 'queued'), 'a lease of a worker that left reaches the holder');

  t.equal(hub.store.lease(view('re'))?.id, 't-re');
  t.equal(await hub.store.complete('t-re', { text: 'E', worker: 'ghost', attempt: 1 }), 'recorded');
  t.ok(await holderSees('t-re', 'done'), 'done: the result reaches the holder');
  t.equal(replica.get('t-re')?.result?.text, 'E');

  await hub.cancel(['t-rf'], 'test');
  t.ok(await holderSees('t-rf', 'failed'), 'failed (cancelled): the holder has the failure');

  t.equal(hub.failover.stats.fullSyncs, fullSyncs, 'no repair sync ran: the deltas alone carried every change');
  for (const type of ['accepted', 'leased', 'requeued', 'done', 'failed']) t.ok(events.includes(type as StoreEvent['type']), `the store emitted ${type}`);
  for (const r of roles) t.equal(replica.state(`t-${r}`), hub.store.queue.get(`t-${r}`)!.state, `holder and hub agree on t-${r}`);
});
