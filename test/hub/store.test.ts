import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { TaskQueue, TaskStore } from '../../hub/index.js';

const opts = { maxDepth: 100, leaseMs: 1000, defaultMaxAttempts: 3 };
const w = (id: string, role?: string, caps: string[] = []) => ({ id, role, caps });

t.test('higher priority first, FIFO within a priority', async (t) => {
  const q = new TaskQueue(opts);
  for (const [id, priority] of [['a', 0], ['b', 5], ['c', 0], ['d', 5]] as const) q.add({ id, prompt: id, priority });
  const order = [1, 2, 3, 4].map(() => q.next(w('w'))!.id);
  t.same(order, ['b', 'd', 'a', 'c']);
  t.equal(q.next(w('w')), undefined);
  t.same(q.counts(), { queued: 0, leased: 4, done: 0, failed: 0 });
});

t.test('role and capabilities decide who may take a task', async (t) => {
  const q = new TaskQueue(opts);
  q.add({ id: 'judge', prompt: '', priority: 0, role: 'judge' });
  q.add({ id: 'gpu', prompt: '', priority: 9, caps: ['gpu'] });
  q.add({ id: 'any', prompt: '', priority: 0 });
  t.equal(q.next(w('plain'))!.id, 'any', 'a plain worker only gets the role-less task');
  t.equal(q.next(w('plain')), undefined);
  t.equal(q.next(w('j', 'judge'))!.id, 'judge');
  t.equal(q.next(w('g', undefined, ['gpu', 'x']))!.id, 'gpu');
});

t.test('a failed lease is retried with backoff until its attempts run out', async (t) => {
  let now = 1000;
  const q = new TaskQueue({ ...opts, clock: () => now, backoffMs: 100 });
  q.add({ id: 'x', prompt: '', priority: 0 });
  for (let attempt = 1; attempt <= 2; attempt++) {
    t.equal(q.next(w('w'))!.attempts, attempt);
    t.equal(q.fail('x', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'boom' }, true), 'retry');
    t.equal(q.next(w('w')), undefined, 'not before its backoff');
    const at = q.nextReadyAt()!;
    t.ok(at > now, 'ready later');
    now = at;
  }
  q.next(w('w'));
  t.equal(q.fail('x', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'boom' }, true), 'failed');
  t.equal(q.get('x')!.error!.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
  t.same(q.counts(), { queued: 0, leased: 0, done: 0, failed: 1 });
});

t.test('a non-retryable failure fails at once; a report from a non-holder is ignored', async (t) => {
  const q = new TaskQueue(opts);
  q.add({ id: 'x', prompt: '', priority: 0 });
  q.next(w('a'));
  t.equal(q.fail('x', 'b', { code: 'SWARM_ERR_TASK_FAILED', msg: '' }, true), 'ignored');
  t.equal(q.fail('x', 'a', { code: 'SWARM_ERR_LOOP_DETECTED', msg: 'loop' }, false), 'failed');
  t.equal(q.get('x')!.error!.code, 'SWARM_ERR_LOOP_DETECTED');
});

t.test('leases come back when a worker leaves or a lease expires; the first result wins', async (t) => {
  let now = 0;
  const q = new TaskQueue({ ...opts, clock: () => now });
  q.add({ id: 'x', prompt: '', priority: 0 });
  q.add({ id: 'y', prompt: '', priority: 0 });
  q.next(w('a'));
  q.next(w('b'));
  t.same(q.release('a').map((r) => r.id), ['x']);
  now = 5000;
  t.same(q.expireLeases().map((r) => r.id), ['y']);
  t.same(q.counts(), { queued: 2, leased: 0, done: 0, failed: 0 });
  q.next(w('c'));
  t.equal(q.complete('x', { text: 'late from a', worker: 'a', attempt: 1 }), 'recorded', 'a late result still counts');
  t.equal(q.complete('x', { text: 'from c', worker: 'c', attempt: 2 }), 'duplicate');
  t.equal(q.get('x')!.result!.text, 'late from a');
  t.equal(q.next(w('c'))!.id, 'y', 'the stale queue entry of x is skipped');
  t.same(q.counts(), { queued: 0, leased: 1, done: 1, failed: 0 });
});

t.test('the queue refuses a batch past its depth, all or nothing', async (t) => {
  const s = await TaskStore.open(undefined, { ...opts, maxDepth: 3 }, { fsyncMs: 0 });
  await s.submitMany([{ prompt: 'a' }, { prompt: 'b' }]);
  await t.rejects(s.submitMany([{ prompt: 'c' }, { prompt: 'd' }]), { code: 'SWARM_ERR_QUEUE_FULL' });
  t.equal(s.queue.counts().queued, 2);
  await t.rejects(s.submitMany([{ prompt: 'ok' }, { prompt: 5 }]), { code: 'SWARM_ERR_BAD_PAYLOAD', message: /task 2: prompt/ });
  await t.rejects(s.submitMany([{ prompt: 'x', promt: 'typo' }]), { code: 'SWARM_ERR_BAD_PAYLOAD' }, 'unknown fields are refused');
});

t.test('the journal replays: tasks requeued, results recorded once, a torn last line cut off', async (t) => {
  const dir = t.testdir();
  const s1 = await TaskStore.open(dir, opts, { fsyncMs: 0 });
  const acc = await s1.submitMany([{ id: 'a', prompt: 'A' }, { id: 'b', prompt: 'B' }, { id: 'c', prompt: 'C', max_attempts: 1 }, { id: 'a', prompt: 'again' }]);
  t.same(acc.map((x) => x.duplicate), [false, false, false, true]);
  s1.lease(w('w'));
  t.equal(await s1.complete('a', { text: 'done-a', worker: 'w', attempt: 1 }), 'recorded');
  t.equal(await s1.complete('a', { text: 'again', worker: 'w', attempt: 2 }), 'duplicate');
  s1.lease(w('w')); s1.lease(w('w'));
  await s1.fail('c', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' }, true);
  await s1.close();
  fs.appendFileSync(path.join(dir, 'journal.ndjson'), '{"t":"result","id":"b","te'); // a crash mid-write
  const s2 = await TaskStore.open(dir, opts, { fsyncMs: 0 });
  t.equal(s2.corruptLines, 1);
  t.equal(s2.queue.get('a')!.result!.text, 'done-a');
  t.equal(s2.queue.get('b')!.state, 'queued', 'the leased task is queued again');
  t.equal(s2.queue.get('c')!.state, 'failed');
  t.same(s2.queue.counts(), { queued: 1, leased: 0, done: 1, failed: 1 });
  const seen: string[] = [];
  s2.onChange((r) => seen.push(`${r.id}:${r.state}`));
  s2.lease(w('w'));
  await s2.complete('b', { text: 'done-b', worker: 'w', attempt: 1 });
  await s2.close();
  t.same(seen, ['b:done']);
  const lines = fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { t: string; id?: string });
  t.same(lines.filter((l) => l.t === 'result').map((l) => l.id), ['a', 'b'], 'one result line per task');
});
