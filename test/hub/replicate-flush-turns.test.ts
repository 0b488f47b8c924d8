import t from 'tap';
import { Type } from '../../protocol/index.js';
import { HolderProc, heldOf } from '../helpers/holder-proc.js';
import { startHub } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * One submit of thousands of tasks is one flush to the holders: every entry built, signed and
 * encoded, then handed to each holder's feed. It was all done in one turn of the hub's event loop
 * (a 10,000-task submit held it 0.1-1.1 s: bench/submit-replicate.ts), so every other link waited.
 * Now a large flush is built a slice at a time, over several turns, and handed to the feeds in one
 * step, in order behind what came before it. Holders in processes of their own, on loopback; a task
 * of the batch is run while the flush is built, and a second submit comes behind it: each holder's
 * copy equals the hub's, and the deltas reach it in the order they did before.
 */

const TOKEN = 'replicate-flush-turns-token-0123456789abcdef';
const N = 6000;
const pad = 'q'.repeat(1500);

t.test('a large flush is built over several turns of the loop; the holders get it whole, in order, as the hub has it', async (t) => {
  const { hub, addr, stop } = await startHub({ token: TOKEN, deadAfterMs: 300_000 });
  const holders = ['ft-h1', 'ft-h2'].map((id) => HolderProc.start(id, addr.port, TOKEN));
  t.teardown(async () => { await Promise.all(holders.map((h) => h.stop())); await stop(); });
  const synced = () => { const fs = hub.failover.feedViews(); return hub.failover.holders().length === 2 && fs.length === 2 && fs.every((f) => !f.syncing && f.syncs >= 1); };
  t.ok(await until(synced, 60_000), 'two holder processes joined and were synced');
  clearInterval((hub.failover as unknown as { fullTimer?: NodeJS.Timeout }).fullTimer);

  // What the hub sends each holder, as it goes down the link: the ids of the delta frames, in order.
  const seen = new Map<string, string[]>();
  for (const id of hub.failover.holders()) {
    const conn = hub.registry.get(id)!.conn;
    const ids: string[] = [];
    seen.set(id, ids);
    const send = conn.send.bind(conn);
    conn.send = ((type, payload, opts) => {
      if (type === Type.STATE) { const p = payload as { full: boolean; entries: { id: string }[] }; if (!p.full) for (const e of p.entries) ids.push(e.id); }
      return send(type, payload, opts);
    }) as typeof conn.send;
  }

  // Turns of the loop from the moment the store accepted the batch until the flush was handed over.
  const store = hub.store as unknown as { submitMany: (s: readonly unknown[], o?: unknown) => Promise<unknown> };
  const submitMany = store.submitMany.bind(store);
  let turns = -1, counting = false;
  const deltas0 = hub.failover.stats.deltas;
  let ran: string | undefined;
  let small: Promise<unknown> | undefined;
  const order: string[] = [];
  const tick = () => {
    if (!counting) return;
    if (hub.failover.stats.deltas > deltas0) { counting = false; return; }
    turns++;
    // While the flush is built: a task of the batch runs, and another client submits more.
    if (turns === 1) {
      const rec = hub.store.lease({ id: 'ghost', role: 'x', caps: [] });
      if (rec) { ran = rec.id; void hub.store.complete(rec.id, { text: `echo: ${rec.spec.prompt}`, worker: 'ghost', attempt: rec.attempts }); }
      small = hub.submit(Array.from({ length: 5 }, (_, i) => ({ id: `ft-small-${i}`, prompt: `small ${i}`, role: 'x' }))).then(() => order.push('small'));
    }
    setImmediate(tick);
  };
  store.submitMany = async (s, o) => {
    const out = await submitMany(s, o);
    if (s.length === N) { counting = true; turns = 0; setImmediate(tick); }
    return out;
  };
  const big = Array.from({ length: N }, (_, i) => `ft-${i}`);
  await hub.submit(big.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' }))).then(() => order.push('big'));
  await small;
  t.ok(turns >= 2, `the flush was built over ${turns} turns of the loop (before: handed over in the turn the store accepted the batch)`);
  t.ok(ran !== undefined && big.includes(ran), `a task of the batch ran while it was built (${ran})`);
  t.same(order, ['big', 'small'], 'the submit behind it was answered after it');
  t.equal(hub.failover.stats.behindResumed + hub.failover.stats.behindRestarted, 0, 'no holder fell behind');

  const ids = [...big, ...Array.from({ length: 5 }, (_, i) => `ft-small-${i}`)];
  const base = ids.length;
  t.ok(await until(async () => (await Promise.all(holders.map((h) => h.size()))).every((n) => n >= base), 60_000), 'each holder holds every task');
  const want = ids.map((id) => { const r = hub.store.queue.get(id)!; return heldOf(r.state, r.spec, r.result?.text); });
  // The task run meanwhile reaches the holders done (by the next flush), as the hub has it.
  t.ok(await until(async () => (await Promise.all(holders.map((h) => h.held([ran!])))).every(([x]) => x![0] === 'done'), 30_000), 'the task run meanwhile is done on each holder');
  t.equal(hub.failover.stats.behindResumed + hub.failover.stats.behindRestarted, 0, `no holder fell behind, then either (${JSON.stringify(hub.failover.feedViews())})`);
  for (const h of holders) {
    const got = await h.held(ids);
    const lost = got.filter((g) => g[0] === undefined).length;
    const changed = got.filter((g, i) => g[0] !== undefined && JSON.stringify(g) !== JSON.stringify(want[i])).length;
    t.equal(lost, 0, `${h.id}: lost 0`);
    t.equal(changed, 0, `${h.id}: changed 0 (state, spec and result as the hub has them)`);
    t.equal(await h.size(), base, `${h.id}: duplicated 0, nothing more than the hub's tasks`);
    // First sight of each id, in the order the frames went: the batch in submission order, then the second submit.
    const first = [...new Set(seen.get(h.id)!)];
    t.same(first, ids, `${h.id}: the deltas went in order, the batch then the submit behind it`);
  }
  t.equal(hub.metrics.duplicateResults, 0, 'no result recorded twice');
});
