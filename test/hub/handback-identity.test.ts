import t from 'tap';
import { workerCredential } from '../../protocol/index.js';
import { hubKey, hubSignSpec, signResult, signSpec } from '../../protocol/result-mac.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';

/**
 * A handback result carries its producer's MAC: any worker may hand back a dead member's results,
 * none can forge one, record over another worker's live lease, or create a task the hub cannot verify.
 */

const TOKEN = 'handback-identity-token-0123456789';
const key = (id: string) => workerCredential(TOKEN, id);

const join = (addr: { host: string; port: number }, id: string) => RawWorker.join(addr, id, key(id));
t.test('forged results are refused with an ERROR and record nothing', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  const w2 = await join(addr, 'w-2');
  t.teardown(() => w2.destroy());
  await hub.submit([{ id: 'i6-1', prompt: 'one' }]);
  const req = await w2.next((f) => f.type === 'TASK_REQ');
  t.equal(req?.payload.task_id, 'i6-1', 'w-2 holds the lease of i6-1');
  const w9 = await join(addr, 'w-9');
  t.teardown(() => w9.destroy());
  await hub.submit([{ id: 'q-1', prompt: 'queued' }]);
  t.equal((await w9.next((f) => f.type === 'TASK_REQ'))?.payload.task_id, 'q-1', 'w-9 has q-1 leased; both workers are full now');
  await hub.submit([{ id: 'q-2', prompt: 'queued, never leased' }]);
  t.equal(hub.store.queue.get('q-2')?.state, 'queued');

  // The reported attack, word for word: w-9's own credential, a result in w-2's name.
  const r1 = await w9.handBack([{ id: 'i6-1', result: { worker: 'w-2', attempt: 1, text: 'FORGED' } }]);
  t.equal(r1?.type, 'ERROR', 'forged over a live lease: refused');
  t.equal(r1?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED');
  t.match(r1?.payload.msg, /i6-1: result has no valid MAC of worker w-2/);
  t.equal(hub.store.queue.get('i6-1')?.state, 'leased', 'nothing recorded');

  // A MAC made with w-9's key but in w-2's name does not verify either.
  const r2 = await w9.handBack([{ id: 'i6-1', result: { worker: 'w-2', attempt: 1, text: 'FORGED', mac: signResult(key('w-9'), 'i6-1', 1, 'FORGED') } }]);
  t.equal(r2?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', 'a MAC under the wrong key: refused');

  // w-9's own genuine MAC, but the task is w-2's live lease.
  const r3 = await w9.handBack([{ id: 'i6-1', result: { worker: 'w-9', attempt: 1, text: 'MINE', mac: signResult(key('w-9'), 'i6-1', 1, 'MINE') } }]);
  t.equal(r3?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', "a signed result over another worker's live lease: refused");
  t.match(r3?.payload.msg, /leased to w-2, which is connected/);
  t.equal(hub.store.queue.get('i6-1')?.state, 'leased', 'nothing recorded');

  // For a queued task.
  const r4 = await w9.handBack([{ id: 'q-2', result: { worker: 'w-2', attempt: 1, text: 'FORGED' } }]);
  t.equal(r4?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', 'forged for a queued task: refused');
  t.equal(hub.store.queue.get('q-2')?.state, 'queued', 'nothing recorded');

  // For an id the hub never had: neither a bare result nor one with an unsigned or forged spec creates it.
  const r5 = await w9.handBack([{ id: 'ghost-1', result: { worker: 'w-2', attempt: 1, text: 'FORGED' } }]);
  t.equal(r5?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', 'forged for an unknown id: refused');
  const r6 = await w9.handBack([{ id: 'ghost-2', spec: { id: 'ghost-2', prompt: 'x' }, seq: 1, result: { worker: 'w-9', attempt: 1, text: 'X', mac: signResult(key('w-9'), 'ghost-2', 1, 'X') } }]);
  t.equal(r6?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', 'an unknown id whose spec has no MAC: refused');
  t.match(r6?.payload.msg, /ghost-2: unknown task, and its spec has no valid MAC/);
  const r7 = await w9.handBack([{ id: 'ghost-3', spec: { id: 'ghost-3', prompt: 'x' }, spec_mac: 'sh1.' + '0'.repeat(64), seq: 1 }]);
  t.equal(r7?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED', 'an unknown id with a forged hub MAC: refused');
  t.notOk(hub.store.queue.has('ghost-1') || hub.store.queue.has('ghost-2') || hub.store.queue.has('ghost-3'), 'no task was created');
  t.equal(hub.failover.stats.recorded, 0, 'nothing recorded by any handback');
  t.match(hub.failover.stats, { refused: 6, leaseHeld: 1 });

  // w-2's real answer is the one recorded.
  w2.send('TASK_RES', { task_id: 'i6-1', text: 'real', done: true, seq: 0 }, { re: req.id });
  const deadline = Date.now() + 5000;
  while (hub.store.queue.get('i6-1')?.state !== 'done' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  t.equal(hub.store.queue.get('i6-1')?.result?.text, 'real', "the lease holder's answer is recorded");
});

t.test("a survivor hands back a dead member's genuine results; they are recorded", async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  await hub.submit([{ id: 'd-1', prompt: 'one' }, { id: 'd-2', prompt: 'two' }]);
  // w-5 ran d-1 and died (it is not connected); w-9 holds its result in its replica.
  const w9 = await join(addr, 'w-9');
  t.teardown(() => w9.destroy());
  const leased = (await w9.next((f) => f.type === 'TASK_REQ'))?.payload.task_id;
  const queued = leased === 'd-1' ? 'd-2' : 'd-1';
  t.equal(hub.store.queue.get(queued)?.state, 'queued');
  const hk = hubKey(TOKEN);
  const born = { id: 'born-1', prompt: 'a node of a topology run, created in gossip mode' };
  const fromHub = { id: 'lost-1', prompt: 'replicated by a hub that lost its journal', priority: 0 };
  const r = await w9.handBack([
    { id: queued, result: { worker: 'w-5', attempt: 1, text: 'by w-5', mac: signResult(key('w-5'), queued, 1, 'by w-5') } },
    // Its own result for the task it holds now.
    { id: leased, result: { worker: 'w-9', attempt: 1, text: 'by w-9', mac: signResult(key('w-9'), leased, 1, 'by w-9') } },
    // A task an acting coordinator (w-5) created: its spec is signed by w-5; so is the result.
    { id: 'born-1', spec: born, spec_mac: signSpec(key('w-5'), 'w-5', born), seq: 7, result: { worker: 'w-5', attempt: 1, text: 'born', mac: signResult(key('w-5'), 'born-1', 1, 'born') } },
    // A task an earlier hub replicated (keys in another order than it signed them in).
    { id: 'lost-1', spec: { priority: 0, prompt: fromHub.prompt, id: 'lost-1' }, spec_mac: hubSignSpec(hk, fromHub), seq: 8 },
  ]);
  t.equal(r?.type, 'ACK', 'accepted');
  t.match(r?.payload, { recorded: 3, duplicate: 0 });
  t.equal(hub.store.queue.get(queued)?.result?.text, 'by w-5', "the dead member's result is recorded in its name");
  t.equal(hub.store.queue.get(queued)?.result?.worker, 'w-5');
  t.equal(hub.store.queue.get(leased)?.result?.text, 'by w-9');
  t.equal(hub.store.queue.get('born-1')?.result?.text, 'born', 'a verifiable task unknown to the hub is created and recorded');
  t.equal(hub.store.queue.get('lost-1')?.state === undefined, false, 'a hub-signed spec is taken back');

  // A mixed frame: the genuine entry is merged, the forged one refused, and the ERROR says so.
  await hub.submit([{ id: 'm-1', prompt: 'm1' }, { id: 'm-2', prompt: 'm2' }]);
  const free = ['m-1', 'm-2'].filter((id) => hub.store.queue.get(id)?.state === 'queued');
  t.ok(free.length >= 1);
  const [good, bad] = free.length === 2 ? free : [free[0]!, 'm-unknown'];
  const m = await w9.handBack([
    { id: good, result: { worker: 'w-5', attempt: 1, text: 'ok', mac: signResult(key('w-5'), good!, 1, 'ok') } },
    { id: bad, result: { worker: 'w-5', attempt: 1, text: 'forged' } },
  ]);
  t.equal(m?.payload.code, 'SWARM_ERR_HANDBACK_REFUSED');
  t.match(m?.payload.msg, /1 of 2 handback entries refused.*1 recorded/);
  t.equal(hub.store.queue.get(good!)?.result?.text, 'ok');
  t.notOk(hub.store.queue.get(bad!)?.result, 'the forged one is not recorded');
});

t.test('what the hub replicates carries its MAC, which it verifies when handed back', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN });
  t.teardown(stop);
  await hub.submit([{ id: 's-1', prompt: 'one' }]);
  t.equal(await hub.store.complete('s-1', { text: 'done', worker: 'w-4', attempt: 1 }), 'recorded');
  const e = hub.failover.entry(hub.store.queue.get('s-1')!, true);
  t.match(e.spec_mac, /^sh2\.\d+\.[0-9a-f]{64}$/, 'signed with the time the hub accepted it');
  t.match(e.result?.mac, /^rh1\.[0-9a-f]{64}$/);
  const { hub: hub2, addr: addr2, stop: stop2 } = await startHub({ token: TOKEN });
  t.teardown(stop2);
  void addr;
  const w = await join(addr2, 'w-9');
  t.teardown(() => w.destroy());
  const r = await w.handBack([e]);
  t.match(r?.payload, { recorded: 1 }, 'a new hub of the swarm takes it back');
  t.equal(hub2.store.queue.get('s-1')?.result?.worker, 'w-4');
});
