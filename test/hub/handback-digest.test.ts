import t from 'tap';
import { tempDir } from '../helpers/cli.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { narrowByDigest, type HandbackDigest } from '../../worker/gossip/handback-digest.js';
import type { Entry } from '../../worker/gossip/replica.js';
import type { TaskRecord } from '../../hub/task.js';

/**
 * Digest-first handback: a member back from gossip mode sends a digest of the final entries it would
 * hand back; the hub answers the buckets that differ from its own final tasks; only the ids of those
 * are offered. The ids offered follow what the hub lacks, not the replica's size, and nothing the
 * hub lacks is left out: an unknown task, one not final there, one the hub evicted (known by id).
 */

const DONE = 12_000, EVICTED = 200, LACKING = 150, OPEN = 20;

t.test('a digest-first handback offers a fraction of the replica and still every id the hub lacks', async (t) => {
  const { hub, addr, stop } = await startHub({ retainCount: DONE, stateDir: tempDir(t) });
  t.teardown(stop);
  const ev = Array.from({ length: EVICTED }, (_, i) => `ev-${i}`);
  const done = Array.from({ length: DONE }, (_, i) => `d-${i}`);
  const open = Array.from({ length: OPEN }, (_, i) => `o-${i}`);
  // The evicted ones finish first, so the count horizon takes them out.
  for (const ids of [ev, done]) {
    await hub.store.submitMany(ids.map((id) => ({ id, prompt: `p ${id}` })));
    for (;;) {
      const rec = hub.store.lease({ id: 'w1', caps: [] });
      if (!rec) break;
      await hub.store.complete(rec.id, { text: `a ${rec.id}`, worker: 'w1', attempt: rec.attempts });
    }
  }
  await hub.store.evict();
  t.equal(hub.store.queue.counts().done, DONE, 'the evicted tasks left the hot state');
  t.equal(hub.store.queue.get('ev-0'), undefined);
  await hub.store.submitMany(open.map((id) => ({ id, prompt: `p ${id}` })));

  // The member's replica: everything above finished (the open ones by itself, in gossip mode), plus tasks the hub never saw.
  const lacking = Array.from({ length: LACKING }, (_, i) => `u-${i}`);
  const entry = (id: string, worker: string): Entry => ({ id, spec: { id, prompt: `p ${id}` }, seq: 1, result: { worker, attempt: 1, text: `a ${id}` } } as Entry);
  const entries = [...ev.map((id) => entry(id, 'w1')), ...done.map((id) => entry(id, 'w1')), ...open.map((id) => entry(id, 'hb-1')), ...lacking.map((id) => entry(id, 'hb-1'))];
  // A few the hub holds with another outcome: they differ, and are offered (the hub wants none).
  for (const e of entries.slice(EVICTED, EVICTED + 10)) e.result = { worker: 'hb-1', attempt: 2, text: 'other' } as Entry['result'];

  const w = await RawWorker.connect(addr);
  t.teardown(() => w.destroy());
  t.equal((await w.handshake({ worker_id: 'hb-1', slots: 1, peer_addr: '127.0.0.1:9' }))?.type, 'HANDSHAKE_ACK');
  const ask = async (payload: unknown): Promise<Frame> => { const m = w.send('HANDBACK', payload); return (await w.next((f) => f.re === m, 30_000))!; };
  const digest = async (d: HandbackDigest): Promise<number[] | undefined> => {
    const r = await ask({ entries: [], digest: d });
    t.equal(r.type, 'ACK', JSON.stringify(r.payload).slice(0, 200));
    return r.payload.differ as number[] | undefined;
  };
  const wanted = async (ids: string[]): Promise<string[]> => {
    const want: string[] = [];
    for (let i = 0; i < ids.length; i += 4000) want.push(...((await ask({ entries: [], offer: ids.slice(i, i + 4000) })).payload.want as string[]));
    return want.sort();
  };

  const stats = { digests: 0, digestValues: 0 };
  const narrowed = await narrowByDigest(entries, [], digest, stats);
  t.ok(narrowed, 'the hub takes digests');
  const offer = narrowed!.map((e) => e.id);
  t.comment(`${entries.length} final entries; ${stats.digests} digest frames of ${stats.digestValues} values; ${offer.length} ids offered`);
  const must = [...open, ...lacking];
  const offered = new Set(offer);
  t.same(must.filter((id) => !offered.has(id)), [], 'every id the hub lacks is offered (unknown, or not final there)');
  t.ok(offer.length <= 6 * (must.length + EVICTED + 10), `the offer follows what differs (${offer.length} ids), not the replica (${entries.length})`);
  t.ok(offer.length * 10 < entries.length, 'a tenth of the replica at most');
  // The hub's rules for what it wants hold as for a full offer: the evicted ids are known, not wanted.
  const all = await wanted(entries.map((e) => e.id));
  t.same(await wanted(offer), all, 'the narrowed offer gets the same answer as offering every id');
  t.same(all, [...must].sort(), 'the hub wants exactly the unknown and the not-final ids');
  t.match(hub.failover.stats, { digests: stats.digests });
  const c = hub.store.queue.counts();
  t.equal(c.done, DONE, 'a digest merges nothing');
});

t.test('a hub without digests (no `differ` in its ACK): every entry is offered', async (t) => {
  const entries = Array.from({ length: 500 }, (_, i) => ({ id: `x-${i}`, result: { worker: 'w', attempt: 1, text: 'x' } }) as Entry);
  t.equal(await narrowByDigest(entries, [], async () => undefined, { digests: 0, digestValues: 0 }), undefined);
});

t.test('a digest the hub cannot read is answered without `differ`, not refused', async (t) => {
  const { addr, stop } = await startHub();
  t.teardown(stop);
  const w = await RawWorker.connect(addr);
  t.teardown(() => w.destroy());
  await w.handshake({ worker_id: 'hb-2', slots: 1, peer_addr: '127.0.0.1:9' });
  const m = w.send('HANDBACK', { entries: [], digest: { n: 12, h: [1, 2, 3] } });
  const r = await w.next((f) => f.re === m, 10_000);
  t.equal(r?.type, 'ACK');
  t.equal(r?.payload.differ, undefined, 'no `differ`: the worker offers every id');
});

t.test('digest frames flooded in one write: each answered, one pass over the hot state at a time', async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  await hub.store.submitMany(Array.from({ length: 2000 }, (_, i) => ({ id: `f-${i}`, prompt: 'p' })));
  const w = await RawWorker.connect(addr);
  t.teardown(() => w.destroy());
  await w.handshake({ worker_id: 'hb-3', slots: 1, peer_addr: '127.0.0.1:9' });
  const FLOOD = 20;
  const d = { n: 64, h: Array.from({ length: 64 }, () => 0) };
  w.sock.cork();
  const sent = Array.from({ length: FLOOD }, () => w.send('HANDBACK', { entries: [], digest: d }));
  w.sock.uncork();
  const acks = await Promise.all(sent.map((m) => w.next((f) => f.re === m, 20_000)));
  t.equal(acks.filter((a) => a?.type === 'ACK').length, FLOOD, 'every frame is answered');
  const s = hub.failover.stats;
  t.equal(s.digests + s.digestsRefused, FLOOD);
  t.ok(s.digestsRefused > 0, `frames sent while this worker's pass ran are not compared (${s.digestsRefused} of ${FLOOD})`);
  t.equal(acks.filter((a) => a?.payload.differ !== undefined).length, s.digests, 'those answered without `differ` (the worker offers every id)');
  // Once answered, the next one is compared again.
  const m = w.send('HANDBACK', { entries: [], digest: d });
  t.ok(Array.isArray((await w.next((f) => f.re === m, 20_000))?.payload.differ));
});

t.test('FailoverController: a member back from gossip mode offers the ids of the differing buckets only', async (t) => {
  const { ranInGossip } = await import('../helpers/gossip-sim.js');
  const { FailoverController } = await import('../../worker/gossip/failover.js');
  const { differingBuckets } = await import('../../hub/handback-digest.js');
  const TASKS = 600, LACKS = 12;
  const { sw } = await ranInGossip(5, 41, TASKS);
  t.teardown(() => { for (const n of sw.nodes) n.stop(); });
  // The hub has every task final as the replica does but the last few, which it lost (killed before its journal had them).
  const hubFinal = new Map<string, TaskRecord>();
  const ids = sw.nodes[1]!.replica.ids();
  for (const id of ids.slice(LACKS)) {
    const e = sw.nodes[1]!.replica.peek(id)!;
    hubFinal.set(id, { id, state: 'done', result: { worker: e.result!.worker, attempt: e.result!.attempt, text: '' } } as unknown as TaskRecord);
  }
  const run = async (node: number, digest: boolean) => {
    let sent = 0;
    const c = new FailoverController(sw.nodes[node]!, {
      offer: async (offered) => offered.filter((id) => !hubFinal.has(id)),
      handBack: async (entries) => { sent += entries.length; return { recorded: entries.length, duplicate: 0 }; },
      ...(digest ? { digest: (d: HandbackDigest) => differingBuckets(d, () => hubFinal.values()) } : {}),
    }, { offerChunk: 50 });
    await c.hubConnected();
    t.equal(sw.nodes[node]!.mode, 'star', 'back in star mode');
    return { ...c.stats, sent };
  };
  const old = await run(2, false);
  const now = await run(1, true);
  t.comment(`ids offered: ${old.offered} ids-first, ${now.offered} digest-first (${now.digests} digest frames, ${now.digestValues} values)`);
  t.equal(old.offered, TASKS, 'ids-first offers the whole replica');
  t.ok(now.offered < TASKS / 5, `digest-first offers a fifth of it at most (${now.offered})`);
  t.equal(now.sent, LACKS, 'and hands back exactly what the hub lacks');
  t.equal(old.sent, LACKS);
});
