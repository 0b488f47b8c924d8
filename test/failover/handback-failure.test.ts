import t from 'tap';
import { workerCredential } from '../../protocol/index.js';
import { signFailure, signResult } from '../../protocol/result-mac.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';

/**
 * A final failure decided in gossip mode is handed back as that failure, with the MAC of the member
 * that decided it. A client holding one worker's credential cannot fail a task leased to another
 * live worker, nor one it never held (it lacks the task's signed spec), and no failure replaces a result.
 */

const TOKEN = 'handback-failure-token-0123456789';
const key = (id: string) => workerCredential(TOKEN, id);
const ERR = { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: 'failed 3 time(s); last: SWARM_ERR_TASK_FAILED: exit 3' };

const join = (addr: { host: string; port: number }, id: string) => RawWorker.join(addr, id, key(id));
const failure = (by: string, id: string, attempt = 3, error = ERR) => ({ worker: by, attempt, error, mac: signFailure(key(by), id, attempt, error) });

t.test('forged or misplaced failures are refused and record nothing; a genuine one is recorded failed', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  const w2 = await join(addr, 'w-2');
  t.teardown(() => w2.destroy());
  await hub.submit([{ id: 'l-1', prompt: 'leased to w-2' }]);
  t.equal((await w2.next((f) => f.type === 'TASK_REQ'))?.payload.task_id, 'l-1', 'w-2 holds the lease of l-1');
  const w9 = await join(addr, 'w-9');
  t.teardown(() => w9.destroy());
  await hub.submit([{ id: 'l-9', prompt: 'leased to w-9' }]);
  t.equal((await w9.next((f) => f.type === 'TASK_REQ'))?.payload.task_id, 'l-9', 'both workers are full now');
  await hub.submit([{ id: 'q-1', prompt: 'queued, never leased' }]);
  // What a member that held the task in the replicated state has: the spec with the hub's MAC.
  const held = (id: string) => { const e = hub.failover.entry(hub.store.queue.get(id)!, true); return { spec: e.spec, spec_mac: e.spec_mac }; };

  const r1 = await w9.handBack([{ id: 'q-1', ...held('q-1'), failure: { worker: 'w-2', attempt: 3, error: ERR } }]);
  t.equal(r1?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', 'a failure without a MAC: refused');
  t.match(r1?.payload.msg, /q-1: failure has no valid MAC of worker w-2/);
  const r2 = await w9.handBack([{ id: 'q-1', ...held('q-1'), failure: { ...failure('w-9', 'q-1'), worker: 'w-2' } }]);
  t.match(r2?.payload.msg, /failure has no valid MAC of worker w-2/, "w-9's MAC in w-2's name: refused");
  const r3 = await w9.handBack([{ id: 'q-1', failure: { ...failure('w-9', 'q-1'), error: { ...ERR, msg: 'changed' } } }]);
  t.match(r3?.payload.msg, /failure has no valid MAC of worker w-9/, 'an error changed after signing: refused');

  // Its own genuine MAC, but for a task it never held: no signed spec to show.
  const r4 = await w9.handBack([{ id: 'q-1', failure: failure('w-9', 'q-1') }]);
  t.match(r4?.payload.msg, /q-1: failure without the task's spec and its valid MAC/, 'a task it never held: refused');
  const spec = { id: 'q-1', prompt: 'queued, never leased' };
  const r5 = await w9.handBack([{ id: 'q-1', spec, spec_mac: 'sh1.' + '0'.repeat(64), failure: failure('w-9', 'q-1') }]);
  t.match(r5?.payload.msg, /failure without the task's spec/, 'a forged spec MAC: refused');

  // The task leased to another live worker: that worker's answer is the one to record.
  const r6 = await w9.handBack([{ id: 'l-1', ...held('l-1'), failure: failure('w-9', 'l-1') }]);
  t.match(r6?.payload.msg, /l-1: leased to w-2, which is connected/, "a failure over another worker's live lease: refused");
  t.equal(hub.store.queue.get('q-1')?.state, 'queued', 'q-1 is still queued');
  t.equal(hub.store.queue.get('l-1')?.state, 'leased', 'l-1 is still leased to w-2');
  t.equal(hub.store.queue.counts().failed, 0, 'nothing failed');

  // A genuine failure, as a member's replica holds it: recorded failed with its code and message.
  // Its coordinator counted 3 leases, one handed back unrun: 2 attempts used.
  const ok = await w9.handBack([{ id: 'q-1', ...held('q-1'), seq: 3, lease: { worker: 'w-6', attempt: 3, epoch: 2, until: 0, revoked: true, unrun: 1 }, failure: failure('w-5', 'q-1') }]);
  t.equal(ok?.type, 'ACK', 'accepted');
  t.match(ok?.payload, { recorded: 1, duplicate: 0 });
  const rec = hub.store.queue.get('q-1');
  t.equal(rec?.state, 'failed', 'recorded failed');
  t.same(rec?.error, ERR, 'with the error code and message decided in gossip mode');
  t.equal(rec?.attempts, 2, 'and the attempts gossip mode used');
  const again = await w9.handBack([{ id: 'q-1', ...held('q-1'), failure: failure('w-7', 'q-1', 4, { code: 'SWARM_ERR_TASK_FAILED', msg: 'other' }) }]);
  t.match(again?.payload, { recorded: 0, duplicate: 1 }, 'handed back again (by another member): a duplicate');
  t.same(hub.store.queue.get('q-1')?.error, ERR, 'the first failure stands');
});

t.test('a result wins: a failure never replaces one, and an entry with both records the result', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  const w = await join(addr, 'w-9');
  t.teardown(() => w.destroy());
  await hub.submit([{ id: 'busy', prompt: 'keeps w-9 full' }]);
  await w.next((f) => f.type === 'TASK_REQ');
  await hub.submit([{ id: 'd-1', prompt: 'done' }, { id: 'b-1', prompt: 'both' }, { id: 'o-1', prompt: 'order' }]);
  t.equal(await hub.store.complete('d-1', { text: 'answer', worker: 'w-4', attempt: 1 }), 'recorded');
  const held = (id: string) => { const e = hub.failover.entry(hub.store.queue.get(id)!, true); return { spec: e.spec, spec_mac: e.spec_mac }; };

  const r1 = await w.handBack([{ id: 'd-1', ...held('d-1'), failure: failure('w-9', 'd-1') }]);
  t.match(r1?.payload, { recorded: 0, duplicate: 1 }, 'a failure for a task with a result: a duplicate');
  t.equal(hub.store.queue.get('d-1')?.state, 'done');
  t.equal(hub.store.queue.get('d-1')?.result?.text, 'answer', 'the result stands');

  // One replica's entry with both (the result arrived after the verdict): the result is recorded.
  const r2 = await w.handBack([{ id: 'b-1', ...held('b-1'), result: { worker: 'w-5', attempt: 4, text: 'late', mac: signResult(key('w-5'), 'b-1', 4, 'late') }, failure: failure('w-9', 'b-1') }]);
  t.match(r2?.payload, { recorded: 1 });
  t.equal(hub.store.queue.get('b-1')?.result?.text, 'late', 'an entry with a result and a failure: the result is recorded');

  // One frame, two members' entries: the failure first, the result after. The result is recorded.
  const r3 = await w.handBack([
    { id: 'o-1', ...held('o-1'), failure: failure('w-9', 'o-1') },
    { id: 'o-1', result: { worker: 'w-6', attempt: 2, text: 'won', mac: signResult(key('w-6'), 'o-1', 2, 'won') } },
  ]);
  t.match(r3?.payload, { recorded: 1, duplicate: 1 });
  t.equal(hub.store.queue.get('o-1')?.state, 'done', 'results of a frame are merged before its failures');
});

t.test("a hub's replicated failure carries its MAC; a new hub of the swarm takes it back", async (t) => {
  const { hub, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  await hub.submit([{ id: 'f-1', prompt: 'fails' }]);
  t.equal(await hub.store.cancel('f-1', 'stopped by its owner'), true);
  const e = hub.failover.entry(hub.store.queue.get('f-1')!, true);
  t.match(e.failure?.mac, /^fh1\.[0-9a-f]{64}$/, 'signed by the hub');
  const { hub: hub2, addr: addr2, stop: stop2 } = await startHub({ token: TOKEN });
  t.teardown(stop2);
  const w = await join(addr2, 'w-9');
  t.teardown(() => w.destroy());
  const r = await w.handBack([e]);
  t.match(r?.payload, { recorded: 1 }, 'taken back');
  t.equal(hub2.store.queue.get('f-1')?.state, 'failed');
  t.equal(hub2.store.queue.get('f-1')?.error?.code, 'SWARM_ERR_CANCELLED', 'with its code');
});
