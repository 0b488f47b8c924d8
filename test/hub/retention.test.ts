import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { TaskStore, type StoreEvent } from '../../hub/store.js';
import { readArchive } from '../../hub/archive-read.js';
import { archiveDir, type ArchivedTask } from '../../hub/archive.js';
import { DEFAULT_RETAIN, Retention, parseRetain } from '../../hub/retention.js';
import { swarm, tempDir } from '../helpers/cli.js';

const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const w = { id: 'w', caps: [] as string[] };

/** Submit `ids` and run each to a result through the store, as the hub's parts would. */
async function runAll(s: TaskStore, ids: string[], text = (id: string) => `answer ${id}`): Promise<void> {
  await s.submitMany(ids.map((id) => ({ id, prompt: `prompt ${id}` })));
  for (;;) {
    const rec = s.lease(w);
    if (!rec) break;
    await s.complete(rec.id, { text: text(rec.id), worker: 'w', attempt: rec.attempts });
  }
}

const archived = (dir: string): ArchivedTask[] => { const out: ArchivedTask[] = []; readArchive(dir, {}, (a) => out.push(a)); return out; };

t.test('finished tasks past the count horizon leave memory and the journal for the archive; nothing is lost', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 3 }, evictEveryMs: 3600_000 });
  const evicted: string[] = [];
  s.subscribe((e: StoreEvent) => { if (e.type === 'evicted') evicted.push(...e.ids); });
  const ids = Array.from({ length: 10 }, (_, i) => `t${i}`);
  await runAll(s, ids);
  t.equal(await s.evict(), 7, 'seven over the horizon');
  t.same(evicted, ids.slice(0, 7), 'the oldest leave first, announced as one evicted event');
  t.equal(s.queue.counts().done, 3, 'three finished tasks stay hot');
  t.same(archived(dir).map((a) => [a.id, a.result?.text]), ids.slice(0, 7).map((id) => [id, `answer ${id}`]), 'every evicted result is in the archive');

  // Inside the duplicate window: a resubmit is a duplicate answered from the archive, and a late or
  // handed-back result is a duplicate, not new work.
  const [again] = await s.submitMany([{ id: 't0', prompt: 'prompt t0' }]);
  t.ok(again!.duplicate, 'an evicted id resubmitted is a duplicate');
  t.equal(again!.record.result?.text, 'answer t0', 'answered with the recorded result, read from the archive');
  t.equal(await s.complete('t1', { text: 'late', worker: 'x', attempt: 1 }), 'duplicate', 'a late result for an evicted id is a duplicate');
  t.equal(s.queue.counts().queued, 0, 'nothing evicted came back as work');
  await s.compact();
  await s.close();

  // A restart (snapshot + tail) keeps the horizon and the remembered ids.
  const s2 = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 3 }, evictEveryMs: 3600_000 });
  t.teardown(() => s2.close());
  t.equal(s2.queue.counts().done, 3, 'after a restart the hot state holds the same three');
  t.notOk(s2.queue.has('t0'), 'evicted ids are not replayed into memory');
  const [again2] = await s2.submitMany([{ id: 't2', prompt: 'prompt t2' }]);
  t.ok(again2!.duplicate, 'the duplicate window survives a restart');
  t.equal(s2.lookup('t3')?.result?.text, 'answer t3', 'a task can be looked up by id from the archive');
  t.equal(s2.retention.remembered_ids, 7);
});

t.test('the age horizon evicts every finished task older than it, and only finished ones', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: 60_000, count: 1000 }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  await runAll(s, ['a', 'b']);
  await s.submitMany([{ id: 'open', prompt: 'not run' }]);
  t.equal(await s.evict(Date.now()), 0, 'nothing is old yet');
  t.equal(await s.evict(Date.now() + 120_000), 2, 'both finished tasks are past the age');
  t.ok(s.queue.has('open'), 'an unfinished task never leaves');
});

t.test('the journal holds no evicted task after compaction, without a state dir eviction still bounds memory', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 5 }, evictEveryMs: 3600_000 });
  await runAll(s, Array.from({ length: 50 }, (_, i) => `k${i}`));
  await s.evict();
  await s.compact();
  await s.close();
  const snap = fs.readFileSync(path.join(dir, 'snapshot.ndjson'), 'utf8');
  t.equal((snap.match(/"t":"task"/g) ?? []).length, 5, 'the snapshot holds the hot tasks only');
  t.notOk(snap.includes('answer k0'), 'an evicted result is not in the hot state on disk');
  t.equal(archived(dir).length, 45);

  const mem = await TaskStore.open(undefined, q, j, { retain: { ageMs: 3600_000, count: 5 }, evictEveryMs: 3600_000 });
  t.teardown(() => mem.close());
  await runAll(mem, Array.from({ length: 20 }, (_, i) => `m${i}`));
  await mem.evict();
  t.equal(mem.queue.counts().done, 5);
  t.ok((await mem.submitMany([{ id: 'm0', prompt: 'x' }]))[0]!.duplicate, 'ids are remembered for the window even without an archive');
});

t.test('a lease lost while the hub stalled uses no attempt, and that worker may still hand in its result', async (t) => {
  const s = await TaskStore.open(undefined, { ...q, defaultMaxAttempts: 1 }, j, { evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  await s.submitMany([{ id: 'a', prompt: 'A' }]);
  for (let i = 0; i < 10; i++) {
    const rec = s.lease({ id: `w${i}`, caps: [] });
    t.ok(rec, `leased (${i})`);
    // Pretend the clock jumped 30 s between the store's ticks, as after SIGSTOP.
    s.stall.tick(Date.now() - 30_000, 500);
    s.release(`w${i}`);
  }
  const rec = s.queue.get('a')!;
  t.equal(rec.state, 'queued', 'ten leases lost to stalls: still queued, not exhausted');
  t.equal(rec.attempts, 0, 'no attempt used');
  t.ok(rec.stallLost?.includes('w3'), 'the workers that lost it are known');
  t.equal(await s.complete('a', { text: 'ran once', worker: 'w3', attempt: 1 }), 'recorded', 'a result handed back for it is recorded');
});

t.test('a lease lost without a stall still counts, and sched decides exhaustion once', async (t) => {
  const s = await TaskStore.open(undefined, { ...q, defaultMaxAttempts: 1 }, j, { evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  await s.submitMany([{ id: 'a', prompt: 'A' }]);
  for (let i = 0; i < 3; i++) { s.lease(w); s.release('w'); }
  t.equal(s.queue.get('a')!.state, 'failed');
  t.equal(s.queue.get('a')!.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
  await s.submitMany([{ id: 'b', prompt: 'B', max_attempts: 2 }]);
  s.lease(w);
  t.equal(await s.fail('b', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' }, true), 'retry');
  await new Promise((r) => setTimeout(r, 300));
  s.lease(w);
  t.equal(await s.fail('b', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' }, true), 'failed');
  t.equal(s.queue.get('b')!.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
});

t.test('--retain: 0, negative or unparsable is a usage error', async (t) => {
  const bytes = DEFAULT_RETAIN.bytes;
  t.same(parseRetain('24h,100000'), { ageMs: 86_400_000, count: 100_000, bytes });
  t.same(parseRetain('90m'), { ageMs: 5_400_000, count: 100_000, bytes });
  t.same(parseRetain(',500'), { ageMs: 86_400_000, count: 500, bytes });
  for (const bad of ['0', '-1h', 'soon', '1h,0', '1h,-5', '1h,2.5', ',', '1h,2,3', '1h,0x10', '1h,1e3', '1h,10000001', '1h,999999999999', '367d', '1h,2,3MB,4']) t.throws(() => parseRetain(bad), { code: 'SWARM_ERR_CONFIG' }, bad);
  t.same(parseRetain('366d,10000000'), { ageMs: 366 * 86_400_000, count: 10_000_000, bytes }, 'the largest horizon is taken');
  const r = swarm(['up', '--retain', '0', '--state-dir', tempDir(t)]);
  t.equal(r.code, 2, 'swarm up --retain 0 exits with the usage code');
  t.match(r.stderr, /SWARM_ERR_CONFIG: .*--retain "0": age "0" is not a positive duration/);
  t.equal(r.stderr.split('SWARM_ERR_CONFIG').length, 2, 'the code is named once');
});

t.test('swarm results reads and exports the archive, filtered by id and time', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 1 }, evictEveryMs: 3600_000 });
  await runAll(s, ['r1', 'r2', 'r3']);
  await s.evict();
  await s.close();
  const all = swarm(['results', '--json', '--state-dir', dir]);
  t.equal(all.code, 0, all.stderr);
  const lines = all.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string; state: string; result: { text: string } });
  t.same(lines.map((l) => [l.id, l.state, l.result.text]), [['r1', 'done', 'answer r1'], ['r2', 'done', 'answer r2']]);
  const one = swarm(['results', '--id', 'r2', '--state-dir', dir]);
  t.match(one.stdout, /^r2\tdone\t.*answer r2/);
  const none = swarm(['results', '--json', '--since', '2099-01-01', '--state-dir', dir]);
  t.equal(none.stdout, '');
  const bad = swarm(['results', '--since', 'whenever', '--state-dir', dir]);
  t.equal(bad.code, 2);
});

t.test('an archive on a full disk: eviction fails loudly, the tasks stay hot, and it resumes when space frees', async (t) => {
  const dir = tempDir(t);
  const res = archiveDir(dir);
  fs.mkdirSync(res, { recursive: true });
  const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', res], { encoding: 'utf8' });
  if (m.status !== 0) {
    if (process.env.CI === 'true') { t.fail(`mount: ${m.stderr}`); return; }
    t.plan(0, `skipped: needs a tmpfs: ${(m.stderr || '').trim()}`);
    return;
  }
  t.teardown(() => { spawnSync('umount', ['-l', res]); });
  fs.writeFileSync(path.join(res, 'ballast'), Buffer.alloc(200 * 1024, 1));
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: 3600_000, count: 1 }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  const big = 'x'.repeat(20_000);
  await runAll(s, Array.from({ length: 8 }, (_, i) => `f${i}`), (id) => `${id} ${big}`);
  await t.rejects(s.evict(), { code: 'SWARM_ERR_DISK_FULL' }, 'the archive write fails with the disk-full code');
  t.equal(s.queue.counts().done, 8, 'every finished task is still hot');
  t.equal(s.retention.archive?.disk_full, true, 'reported in the status');
  fs.rmSync(path.join(res, 'ballast'));
  t.equal(await s.evict(), 7, 'with space again the horizon applies');
  t.equal(s.retention.archive?.disk_full, false);
  t.same(archived(dir).map((a) => a.id), ['f0', 'f1', 'f2', 'f3', 'f4', 'f5', 'f6'], 'archived once each, nothing lost');
});

t.test('Retention.forget takes ids out wherever they stand, with their bytes, and keeps the order of the rest', async (t) => {
  const r = new Retention({ ageMs: 1000, count: 100, bytes: 1 << 20 });
  for (let i = 0; i < 6; i++) r.finished(`f${i}`, 100 + i, 10 + i);
  r.forget(['f0', 'f1']);
  t.same([r.size, r.bytes, r.due(100_000, 10)], [4, 12 + 13 + 14 + 15, ['f2', 'f3', 'f4', 'f5']], 'the oldest: as drop');
  r.forget(['f4', 'f2']);
  t.same([r.size, r.bytes, r.due(100_000, 10)], [2, 13 + 15, ['f3', 'f5']], 'out of order: the rest as it was');
  r.finished('f6', 200, 16);
  t.same(r.due(100_000, 10), ['f3', 'f5', 'f6'], 'and it takes new tasks after');
});
