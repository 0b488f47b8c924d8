import t, { type Test } from 'tap';
import { workerCredential } from '../../protocol/index.js';
import { isErrorCode } from '../../protocol/errors.js';
import { signFailure, signResult } from '../../protocol/result-mac.js';
import { tempDir } from '../helpers/cli.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';

/**
 * Failures handed back from gossip mode, as a careless or hostile member sends them: the same frame
 * twice, again after the hub restarted, a failure and a result for one task in two frames in both
 * orders, an error message past the bound, codes outside the catalogue. Each task ends recorded once.
 */

const TOKEN = 'handback-failure-attack-token-0123456789';
const key = (id: string) => workerCredential(TOKEN, id);
const ERR = { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: 'failed 3 time(s); last: SWARM_ERR_TASK_FAILED: exit 3' };

const join = (addr: { host: string; port: number }, id: string) => RawWorker.join(addr, id, key(id));
const failure = (by: string, id: string, error: { code: string; msg: string } = ERR, attempt = 3) => ({ worker: by, attempt, error, mac: signFailure(key(by), id, attempt, error) });
const result = (by: string, id: string, text: string, attempt = 2) => ({ worker: by, attempt, text, mac: signResult(key(by), id, attempt, text) });

/** A hub whose worker w-9 is kept busy, so what is submitted after stays queued. */
async function rig(t: Test, dir?: string) {
  const h = await startHub({ token: TOKEN, ...(dir ? { stateDir: dir } : {}) });
  const w = await join(h.addr, 'w-9');
  t.teardown(async () => { w.destroy(); await h.stop(); });
  await h.hub.submit([{ id: `busy-${Math.random()}`, prompt: 'keeps w-9 full' }]);
  await w.next((f) => f.type === 'TASK_REQ');
  const held = (id: string) => { const e = h.hub.failover.entry(h.hub.store.queue.get(id)!, true); return { spec: e.spec, spec_mac: e.spec_mac }; };
  return { ...h, w, held };
}

t.test('the same failure twice, and again after a restart: recorded once', async (t) => {
  const dir = tempDir(t);
  let r = await rig(t, dir);
  await r.hub.submit([{ id: 'f-1', prompt: 'fails' }]);
  const frame = [{ id: 'f-1', ...r.held('f-1'), failure: failure('w-5', 'f-1') }];
  t.match((await r.w.handBack(frame))?.payload, { recorded: 1, duplicate: 0 }, 'recorded');
  t.match((await r.w.handBack(frame))?.payload, { recorded: 0, duplicate: 1 }, 'the same frame again: a duplicate');
  const attempts = r.hub.store.queue.get('f-1')?.attempts;
  r.w.destroy();
  await r.stop();
  r = await rig(t, dir);
  t.equal(r.hub.store.queue.get('f-1')?.state, 'failed', 'failed after the restart');
  t.match((await r.w.handBack(frame))?.payload, { recorded: 0, duplicate: 1 }, 'replayed to the restarted hub: a duplicate');
  const rec = r.hub.store.queue.get('f-1');
  t.same(rec?.error, ERR, 'the error as first recorded');
  t.equal(rec?.attempts, attempts, 'attempts unchanged');
  t.equal(r.hub.store.queue.counts().failed, 1, 'one failure');
});

t.test('a failure and a result for one task in two frames, both orders', async (t) => {
  const r = await rig(t);
  await r.hub.submit([{ id: 'fr', prompt: 'failure first' }, { id: 'rf', prompt: 'result first' }]);
  t.match((await r.w.handBack([{ id: 'fr', ...r.held('fr'), failure: failure('w-5', 'fr') }]))?.payload, { recorded: 1 });
  const late = await r.w.handBack([{ id: 'fr', ...r.held('fr'), result: result('w-6', 'fr', 'late answer') }]);
  t.equal(late?.type === 'ERROR' ? 'error' : 'ack', 'ack', `a result after the failure is answered, not refused (${JSON.stringify(late?.payload)})`);
  const fr = r.hub.store.queue.get('fr')!;
  t.ok(fr.state === 'failed' || (fr.state === 'done' && fr.result?.text === 'late answer'), `final once: ${fr.state}`);

  t.match((await r.w.handBack([{ id: 'rf', ...r.held('rf'), result: result('w-6', 'rf', 'answer') }]))?.payload, { recorded: 1 });
  t.match((await r.w.handBack([{ id: 'rf', ...r.held('rf'), failure: failure('w-5', 'rf') }]))?.payload, { recorded: 0, duplicate: 1 }, 'a failure after the result: a duplicate');
  t.equal(r.hub.store.queue.get('rf')?.result?.text, 'answer', 'the result stands');
  // In one frame: the result before the failure, and one failure listed twice.
  await r.hub.submit([{ id: 'one-rf', prompt: 'one frame' }, { id: 'twice', prompt: 'twice' }]);
  const one = await r.w.handBack([
    { id: 'one-rf', ...r.held('one-rf'), result: result('w-6', 'one-rf', 'first') },
    { id: 'one-rf', ...r.held('one-rf'), failure: failure('w-5', 'one-rf') },
    { id: 'twice', ...r.held('twice'), failure: failure('w-5', 'twice') },
    { id: 'twice', ...r.held('twice'), failure: failure('w-5', 'twice') },
  ]);
  t.match(one?.payload, { recorded: 2, duplicate: 2 }, `one frame: ${JSON.stringify(one?.payload)}`);
  t.equal(r.hub.store.queue.get('one-rf')?.result?.text, 'first', 'the result is recorded, not the failure');
  t.equal(r.hub.store.queue.get('twice')?.state, 'failed', 'the failure listed twice: failed');
  const c = r.hub.store.queue.counts();
  t.equal(c.done + c.failed, 4, 'every task final, each once');
});

t.test('an error message past the bound, codes outside the catalogue', async (t) => {
  const r = await rig(t);
  const ids = ['big', 'huge', 'code-x', 'code-shell', 'code-empty'];
  await r.hub.submit(ids.map((id) => ({ id, prompt: id })));
  const huge = await r.w.handBack([{ id: 'huge', ...r.held('huge'), failure: failure('w-5', 'huge', { code: ERR.code, msg: 'm'.repeat(64 * 1024 + 1) }) }]);
  t.equal(huge?.payload?.code, 'SWARM_ERR_BAD_PAYLOAD', 'a message past 64 KiB: refused');
  t.equal(r.hub.store.queue.get('huge')?.state, 'queued', 'and nothing recorded');
  const big = await r.w.handBack([{ id: 'big', ...r.held('big'), failure: failure('w-5', 'big', { code: ERR.code, msg: 'm'.repeat(64 * 1024) }) }]);
  t.equal(big?.type, 'ACK', 'a message at the bound: taken');
  for (const [id, code] of [['code-x', 'SWARM_ERR_NOT_IN_THE_CATALOGUE'], ['code-shell', '$(rm -rf /)'], ['code-empty', '']] as const) {
    const reply = await r.w.handBack([{ id, ...r.held(id), failure: failure('w-5', id, { code, msg: 'made up' }) }]);
    const rec = r.hub.store.queue.get(id)!;
    t.ok(rec.state === 'queued' || (rec.state === 'failed' && isErrorCode(rec.error?.code)), `code ${JSON.stringify(code)}: refused or recorded with a catalogued code (${reply?.type} ${rec.state} ${rec.error?.code})`);
  }
  await r.w.handBack([{ id: 'big', ...r.held('big'), failure: failure('w-5', 'big') }]);
  t.equal(r.hub.store.queue.counts().failed + r.hub.store.queue.counts().queued, ids.length, 'nothing else changed');
});

t.test('a failure handed back for a task evicted after its result: never brought back, before or after a restart', async (t) => {
  const dir = tempDir(t);
  let r = await rig(t, dir);
  const ids = ['ev-1', 'ev-2', 'ev-3'];
  await r.hub.submit(ids.map((id) => ({ id, prompt: id })));
  const held = Object.fromEntries(ids.map((id) => [id, r.held(id)]));
  for (const id of ids) t.equal(await r.hub.store.complete(id, { text: `done ${id}`, worker: 'w-4', attempt: 1 }), 'recorded');
  await r.hub.store.evict(Date.now() + 365 * 24 * 3600_000);
  t.notOk(r.hub.store.queue.get('ev-1'), 'ev-1 evicted');
  const frame = [{ id: 'ev-1', ...held['ev-1'], failure: failure('w-5', 'ev-1') }];
  const a = await r.w.handBack(frame);
  t.notOk(a?.payload?.recorded, `not recorded: ${JSON.stringify(a?.payload)}`);
  t.notOk(r.hub.store.queue.get('ev-1'), 'and not back in the queue');
  r.w.destroy();
  await r.stop();
  r = await rig(t, dir);
  const b = await r.w.handBack(frame);
  t.notOk(b?.payload?.recorded, `after a restart, not recorded: ${JSON.stringify(b?.payload)}`);
  const rec = r.hub.store.queue.get('ev-1');
  t.ok(!rec || rec.result?.text === 'done ev-1', `not brought back as a failure (${rec?.state ?? 'absent'})`);
});
