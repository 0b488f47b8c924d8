import t from 'tap';
import {
  ReadySet, afterFailure, backoffMs, canMove, canRun, compareRanked, isRetryable, leaseUntil, maxAttemptsOf,
  BACKOFF_CAP_MS, DEFAULT_LEASE_MS, LEASE_GRACE_MS,
} from '../../sched/index.js';

t.test('states: nothing leaves a final state; a result may finish a queued task', async (t) => {
  t.ok(canMove('queued', 'leased'));
  t.ok(canMove('leased', 'queued'));
  t.ok(canMove('queued', 'done'), 'a result run elsewhere (gossip mode) finishes a queued task');
  t.notOk(canMove('done', 'queued'));
  t.notOk(canMove('failed', 'done'));
});

t.test('order: priority first, then submission order, then id', async (t) => {
  const xs = [
    { id: 'c', priority: 0, seq: 2 }, { id: 'a', priority: 0, seq: 1 }, { id: 'p', priority: 5, seq: 9 },
    { id: 'z' }, { id: 'y' },
  ];
  t.same(xs.sort(compareRanked).map((x) => x.id), ['p', 'a', 'c', 'y', 'z']);
});

t.test('routing: role must match, caps must be a subset', async (t) => {
  t.ok(canRun({ caps: [] }, {}), 'a task that needs nothing runs anywhere');
  t.notOk(canRun({ caps: [] }, { role: 'judge' }));
  t.ok(canRun({ role: 'judge', caps: [] }, { role: 'judge' }));
  t.ok(canRun({ caps: ['gpu', 'x'] }, { caps: ['gpu'] }));
  t.notOk(canRun({ caps: ['x'] }, { caps: ['gpu'] }));
});

t.test('retry: one set of errors not worth retrying, backoff doubles up to a cap', async (t) => {
  t.notOk(isRetryable('SWARM_ERR_BAD_PAYLOAD'));
  t.notOk(isRetryable('SWARM_ERR_LOOP_DETECTED'));
  t.notOk(isRetryable('SWARM_ERR_CONTEXT_EXCEEDED'));
  t.ok(isRetryable('SWARM_ERR_TASK_FAILED'));
  const one = () => 1;
  t.equal(backoffMs(1, one, 100), 100);
  t.equal(backoffMs(3, one, 100), 400);
  t.equal(backoffMs(30, one, 100), BACKOFF_CAP_MS);
  t.equal(backoffMs(1, () => 0, 100), 50, 'jitter takes at most half');
  t.equal(maxAttemptsOf({}), 3);
  t.equal(maxAttemptsOf({ max_attempts: 5 }), 5);
  const err = { code: 'SWARM_ERR_TASK_FAILED' as const, msg: 'boom' };
  t.same(afterFailure(1, 3, err, true, one, 100), { kind: 'retry', delayMs: 100 });
  t.equal((afterFailure(3, 3, err, true, one) as { error: { code: string } }).error.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
  t.same(afterFailure(1, 3, { code: 'SWARM_ERR_LOOP_DETECTED', msg: 'l' }), { kind: 'failed', error: { code: 'SWARM_ERR_LOOP_DETECTED', msg: 'l' } });
});

t.test('lease: one default; a task that names a timeout, that timeout plus slack', async (t) => {
  t.equal(leaseUntil(0, undefined), DEFAULT_LEASE_MS);
  t.equal(leaseUntil(0, 1000), 1000 + LEASE_GRACE_MS, 'a task\'s own timeout decides, even below the default');
  t.equal(leaseUntil(0, 3_600_000), 3_600_000 + LEASE_GRACE_MS);
  t.equal(leaseUntil(10, 1000, 50), 10 + 1000 + LEASE_GRACE_MS);
});

t.test('ready set: best task a worker may run, backed-off tasks wait, removal is lazy', async (t) => {
  let now = 0;
  const r = new ReadySet<string>(() => now);
  const add = (id: string, priority: number, seq: number, needs = {}, at?: number) => r.add({ id, rank: { id, priority, seq }, needs, value: id }, at);
  add('low', 0, 0); add('high', 9, 1); add('gpu', 20, 2, { caps: ['gpu'] }); add('later', 50, 3, {}, 100); add('gone', 30, 4);
  r.delete('gone');
  t.equal(r.next({ caps: [] })?.id, 'high', 'a plain worker skips the gpu task and the removed one');
  t.equal(r.next({ caps: ['gpu'] })?.id, 'gpu');
  t.equal(r.nextReadyAt(), 100);
  t.equal(r.next('any')?.id, 'low', 'the backed-off task waits');
  now = 100;
  t.equal(r.next('any')?.id, 'later');
  t.equal(r.next('any'), undefined);
  t.equal(r.size, 0);
});
