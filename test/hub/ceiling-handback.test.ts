import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { workerCredential } from '../../protocol/index.js';
import { hubKey, hubSignSpecAt, signResult } from '../../protocol/result-mac.js';
import { hotCeiling } from '../../hub/retention.js';
import { RunManager } from '../../hub/runs.js';
import { tempDir } from '../helpers/cli.js';
import { quiet, startControlled, startPool, waitWorkers } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';

/**
 * At the hot-state ceiling (retention.ts `hotCeiling`) a hub refuses new client tasks, but what a
 * worker hands back after a failover ran already: it is taken whatever the hot state holds, through
 * the hub's HANDBACK path and not only the store's. A topology run waits through the refusal.
 */

const TOKEN = 'ceiling-handback-token-0123456789';
const key = (id: string) => workerCredential(TOKEN, id);
const BOUND = 2 ** 20;
const TEXT = 1_000_000;

/**
 * A hub at the ceiling: the retention pass held off (the archive pass behind the load, as when it
 * fell behind), then finished tasks with big prompts and results past the bound and its margin.
 * `release` lets the pass run again (and runs one).
 */
async function hubAtCeiling(t: Test) {
  const dir = tempDir(t);
  const h = await startControlled(t, { token: TOKEN, stateDir: dir, retainBytes: BOUND });
  const store = h.hub.store;
  // The hub config has no pass interval: the store's own pass (every second) is held off by hand.
  let held = true;
  const evict = store.evict.bind(store);
  store.evict = (now?: number) => (held ? Promise.resolve(0) : evict(now));
  const n = Math.ceil(hotCeiling(BOUND) / (2 * TEXT)) + 2;
  const big = (i: number, c: string) => `${i} `.padEnd(TEXT, c);
  await store.submitMany(Array.from({ length: n }, (_, i) => ({ id: `big-${i}`, prompt: big(i, 'p') })));
  for (let k = 0; k < n; k++) {
    const rec = store.lease({ id: 'ghost', caps: [] });
    if (!rec) break;
    await store.complete(rec.id, { text: big(k, 'r'), worker: 'ghost', attempt: rec.attempts });
  }
  t.equal(store.queue.counts().done, n, `${n} big tasks finished`);
  t.ok(store.retention.hot_bytes > hotCeiling(BOUND), `${store.retention.hot_bytes} bytes hot, past the ceiling ${hotCeiling(BOUND)}`);
  const release = async () => { held = false; await store.evict(); };
  return { ...h, dir, release };
}

/** What a dead member (w-5) ran for a hub that lost it, as a survivor hands it back: specs the hub signed, results w-5 signed. */
function handedBack(ids: readonly string[]) {
  const hk = hubKey(TOKEN);
  const at = Date.now();
  return ids.map((id, i) => {
    const spec = { id, prompt: `handed back ${id}`, priority: 0 };
    const text = `ran ${id}`;
    return { id, spec, spec_mac: hubSignSpecAt(hk, spec, at), seq: i + 1, result: { worker: 'w-5', attempt: 1, text, mac: signResult(key('w-5'), id, 1, text) } };
  });
}

/** Every file under `dir` that holds `needle` (the journal, snapshots, archive). */
function filesHolding(dir: string, needle: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const p = path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name);
    if (fs.readFileSync(p).includes(needle)) out.push(p);
  }
  return out;
}

t.test('at the hot ceiling a client submit is refused (SWARM_ERR_QUEUE_FULL, nothing journaled); a worker\'s HANDBACK of tasks the hub does not know is recorded', async (t) => {
  const h = await hubAtCeiling(t);
  const res = await fetch(`http://127.0.0.1:${h.port}/tasks`, { method: 'POST', body: JSON.stringify({ tasks: [{ id: 'client-1', prompt: 'new work' }] }), headers: { 'content-type': 'application/json' } });
  const body = await res.json() as { code?: string; msg?: string };
  t.equal(res.status, 429, 'refused, retryable');
  t.equal(body.code, 'SWARM_ERR_QUEUE_FULL', body.msg ?? JSON.stringify(body));
  t.match(body.msg, /the --retain bytes bound \(1\.0 MiB\) and a margin/);
  t.notOk(h.hub.store.queue.has('client-1'), 'not taken');
  t.same(filesHolding(h.dir, 'client-1'), [], 'nothing journaled');

  // A survivor hands back what a dead member (w-5) ran for a hub that lost it: specs the hub signed, results w-5 signed.
  const ids = Array.from({ length: 40 }, (_, i) => `hb-${i}`);
  const entries = handedBack(ids);
  const w = await RawWorker.join(h.addr, 'w-9', key('w-9'));
  t.teardown(() => w.destroy());
  t.ok(h.hub.store.retention.hot_bytes > hotCeiling(BOUND), 'still past the ceiling when the handback arrives');
  const r = await w.handBack(entries);
  t.equal(r?.type, 'ACK', JSON.stringify(r?.payload));
  t.match(r?.payload, { recorded: ids.length, duplicate: 0 });
  const lost = ids.filter((id) => h.hub.store.queue.get(id)?.result?.text !== `ran ${id}`);
  t.same(lost, [], 'lost: 0');
  t.equal(h.hub.failover.stats.recorded, ids.length, 'duplicated: 0 (each recorded once)');
  t.equal(h.hub.store.queue.counts().done, ids.length + Math.ceil(hotCeiling(BOUND) / (2 * TEXT)) + 2, 'done: the big tasks and the handed-back ones, no more');
  t.notOk(h.hub.store.queue.has('client-1'), 'the client task is still not taken');
});

t.test('a topology run at the ceiling waits through SWARM_ERR_QUEUE_FULL and finishes once a pass brings the hot state down', async (t) => {
  const h = await hubAtCeiling(t);
  const p = startPool(h.addr, 2, { token: TOKEN });
  t.teardown(() => p.stop());
  t.ok(await waitWorkers(h.hub, 2), 'workers joined');
  const runs = new RunManager(h.hub, { dir: path.join(h.dir, 'runs'), version: 'test', log: quiet });
  const refusedBefore = h.hub.store.retention.refused_behind;
  const { run } = await runs.start({ experiment: { topology: 'star', inputs: { items: ['a', 'b', 'c'] } } });
  // Bounded: the runner retries every 250 ms; a few refusals show it is waiting, not failed.
  const deadline = Date.now() + 10_000;
  while (h.hub.store.retention.refused_behind < refusedBefore + 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.ok(h.hub.store.retention.refused_behind >= refusedBefore + 3, `refused ${h.hub.store.retention.refused_behind - refusedBefore} times while behind`);
  t.equal(runs.get(run)?.state, 'running', 'the run is waiting, not failed');
  await h.release();
  t.ok(h.hub.store.retention.hot_bytes <= BOUND, `a pass brings the hot state under the bound (${h.hub.store.retention.hot_bytes} bytes)`);
  let timer: NodeJS.Timeout | undefined;
  const out = await Promise.race([runs.wait(run)!, new Promise<undefined>((r) => { timer = setTimeout(() => r(undefined), 30_000); })]);
  clearTimeout(timer);
  t.equal(out?.verdict, 'done', out ? `the run finished: ${out.verdict} ${out.reason ?? ''}` : 'the run did not finish in 30 s');
  t.equal(h.hub.store.queue.counts().failed, 0, 'no task of the run failed');
});

t.test('a HANDBACK the hub cannot queue (its queue at --max-queue) is answered with the cause\'s own code, and taken once there is room', async (t) => {
  const dir = tempDir(t);
  const h = await startControlled(t, { token: TOKEN, stateDir: dir, maxQueue: 10 });
  await h.hub.store.submitMany(Array.from({ length: 10 }, (_, i) => ({ id: `q-${i}`, prompt: `queued ${i}` })));
  const ids = Array.from({ length: 5 }, (_, i) => `hbq-${i}`);
  const entries = handedBack(ids);
  const w = await RawWorker.join(h.addr, 'w-9', key('w-9'));
  t.teardown(() => w.destroy());
  const refused = await w.handBack(entries);
  t.equal(refused?.type, 'ERROR', JSON.stringify(refused?.payload));
  t.match(refused?.payload, { code: 'SWARM_ERR_QUEUE_FULL' }, 'the queue\'s own code, not SWARM_ERR_BAD_PAYLOAD: the frame was well formed');
  t.same(ids.filter((id) => h.hub.store.queue.has(id)), [], 'nothing of the refused frame taken');
  // The worker keeps its entries and hands them back on a later link: once the queue has room, all of them, once.
  for (let k = 0; k < 10; k++) {
    const rec = h.hub.store.lease({ id: 'ghost', caps: [] });
    if (rec) await h.hub.store.complete(rec.id, { text: 'x', worker: 'ghost', attempt: rec.attempts });
  }
  await h.hub.store.evict(Date.now() + 1e9);
  const again = await w.handBack(entries);
  t.equal(again?.type, 'ACK', JSON.stringify(again?.payload));
  t.match(again?.payload, { recorded: ids.length, duplicate: 0 });
  t.same(ids.filter((id) => h.hub.store.queue.get(id)?.result?.text !== `ran ${id}`), [], 'lost: 0');
  t.equal(h.hub.failover.stats.recorded, ids.length, 'duplicated: 0');
});
