import t from 'tap';
import { tempDir } from '../helpers/cli.js';
import { seededRandom } from '../../protocol/index.js';
import { haveOf } from '../../protocol/replica-have.js';
import { DigestFolds, differingBuckets } from '../../hub/handback-digest.js';
import { outcome } from '../../hub/replicate-held.js';
import { parseRetain } from '../../hub/retention.js';
import { TaskStore } from '../../hub/store.js';
import { isFinal } from '../../hub/task.js';
import type { HandbackDigest } from '../../worker/gossip/handback-digest.js';

/**
 * The restarted hub's handback digests are answered from folds kept between them (hub/handback-digest.ts
 * `DigestFolds`): one pass over the hot state for every worker's digests, not one a worker; kept
 * current by the store's events. Checked against the hub's final tasks folded anew at each question:
 * every answer is exactly the buckets that differ, through results, failures, evictions and tasks
 * submitted meanwhile, for digests of every size, the sub-bucket rounds and the workers skipped.
 */

/** The hub's fold of bucket `b` of `n` now, over its final tasks whose worker `skip` leaves in: the reference. */
function fold(store: TaskStore, n: number, skip: Set<string>): Map<number, number> {
  const out = new Map<number, number>();
  for (const r of store.queue.all()) {
    if (!isFinal(r)) continue;
    const o = outcome(r);
    if (!o || skip.has(o[1])) continue;
    const { b, x } = haveOf(r.id, o[0], o[1], o[2], n);
    out.set(b, ((out.get(b) ?? 0) ^ x) >>> 0);
  }
  return out;
}

t.test('one pass for every digest, each answered exactly as a pass over the hot state would', async (t) => {
  const store = await TaskStore.open(tempDir(t), { maxDepth: 100_000, leaseMs: 600_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 }, { retain: parseRetain('24h,2500'), evictEveryMs: 3_600_000 });
  t.teardown(() => store.close());
  const folds = new DigestFolds();
  store.subscribe(folds.onStoreEvent);
  const rand = seededRandom(5);
  const workers = ['w1', 'w2', 'w3', 'w4'];
  let next = 0;
  /** `k` tasks submitted; most finished by a random worker, some failed for good, the rest left open. */
  const work = async (k: number): Promise<void> => {
    const ids = Array.from({ length: k }, () => `t-${next++}`);
    await store.submitMany(ids.map((id) => ({ id, prompt: `p ${id}`, max_attempts: 1 })));
    for (let i = 0; i < k; i++) {
      const w = workers[Math.floor(rand() * workers.length)]!;
      const rec = store.lease({ id: w, caps: [] });
      if (!rec) break;
      const roll = rand();
      if (roll < 0.8) await store.complete(rec.id, { text: `a ${rec.id}`, worker: w, attempt: rec.attempts });
      else if (roll < 0.9) await store.fail(rec.id, w, { code: 'SWARM_ERR_TASK_FAILED', msg: 'no' }, false);
    }
  };
  let asked = 0, wrong = 0;
  /** Digests of several shapes, each the reference fold with a few values changed: the answer must be exactly those. */
  const check = async (what: string): Promise<void> => {
    for (const n of [16, 256, 4096, 65_536]) {
      for (const skipped of [[], ['w2', 'w3'], workers]) {
        const skip = new Set(skipped);
        const ref = fold(store, n, skip);
        // The sub-bucket rounds ask a few buckets of many; the first round asks them all.
        const buckets = n > 4096 ? Array.from({ length: 300 }, (_, i) => (i * 7919 + 13) % n) : undefined;
        const list = buckets ?? [...Array(n).keys()];
        const h = list.map((b) => ref.get(b) ?? 0);
        const changed = new Set<number>();
        for (let i = 0; i < 5; i++) { const j = Math.floor(rand() * list.length); h[j] = (h[j]! ^ (1 + Math.floor(rand() * 1e9))) >>> 0; changed.add(list[j]!); }
        const d: HandbackDigest = { n, h, skip: skipped, ...(buckets ? { buckets } : {}) };
        const got = await folds.differing(d, () => store.queue.all());
        const pass = await differingBuckets(d, () => store.queue.all());
        asked++;
        const want = [...changed].sort((a, b) => a - b);
        if (JSON.stringify([...got!].sort((a, b) => a - b)) !== JSON.stringify(want) || JSON.stringify([...pass!].sort((a, b) => a - b)) !== JSON.stringify(want)) {
          wrong++;
          t.fail(`${what}: n ${n}, skip ${skipped.join(',')}: folds ${got?.length}, pass ${pass?.length}, changed ${want.length}`);
        }
      }
    }
  };

  await work(4000);
  t.equal(folds.size, 0, 'nothing folded before a digest asks');
  // Two workers' digests at once: one pass between them.
  const d0: HandbackDigest = { n: 64, h: Array.from({ length: 64 }, () => 0), skip: [] };
  const [a, b] = await Promise.all([folds.differing(d0, () => store.queue.all()), folds.differing(d0, () => store.queue.all())]);
  t.same(a, b, 'two digests at once get one answer');
  await check('after the first pass');
  // Results, failures and new tasks since; then the retention horizon evicts finished tasks.
  await work(1500);
  await check('after more results');
  const before = store.queue.counts();
  await store.evict();
  const after = store.queue.counts();
  t.ok(after.done + after.failed < before.done + before.failed, `evicted ${before.done + before.failed - (after.done + after.failed)} finished tasks`);
  await check('after evictions');
  await work(500);
  await check('after more tasks');
  t.equal(wrong, 0, `${asked} digests answered exactly`);
  t.equal(folds.stats.passes, 1, 'one pass over the hot state for all of them');
  t.equal(folds.size, store.queue.counts().done + store.queue.counts().failed, 'every final task folded, no other');
  folds.clear();
});

t.test('folds not asked for a while are dropped, and made again on the next digest', async (t) => {
  const store = await TaskStore.open(tempDir(t), { maxDepth: 10_000, leaseMs: 600_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 });
  t.teardown(() => store.close());
  const folds = new DigestFolds(5, 200);
  store.subscribe(folds.onStoreEvent);
  await store.submitMany(Array.from({ length: 100 }, (_, i) => ({ id: `i-${i}`, prompt: 'p' })));
  for (let rec = store.lease({ id: 'w', caps: [] }); rec; rec = store.lease({ id: 'w', caps: [] })) await store.complete(rec.id, { text: 'x', worker: 'w', attempt: rec.attempts });
  const d: HandbackDigest = { n: 16, h: Array.from({ length: 16 }, () => 0), skip: [] };
  const first = await folds.differing(d, () => store.queue.all());
  t.equal(folds.size, 100);
  await new Promise((r) => setTimeout(r, 400));
  t.equal(folds.size, 0, 'dropped once idle');
  t.same(await folds.differing(d, () => store.queue.all()), first, 'the same answer, made again');
  t.equal(folds.stats.passes, 2);
  folds.clear();
});
