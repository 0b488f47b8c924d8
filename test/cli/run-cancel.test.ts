import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { api, journal, swarm, tempDir, until } from '../helpers/cli.js';

interface Status { workers: { id: string; inflight: number }[]; tasks: { queued: number; leased: number; done: number; failed: number } }

t.test('swarm runs cancel: no more nodes, outstanding tasks stop on the workers, recorded as cancelled', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  // Echo workers whose tasks take 10 minutes: only a cancel can free them within this test's bounds.
  const up = swarm(['up', '--detach', '--agents', '2', '--driver', 'echo', '--driver-opt', 'latency_ms=600000', '--state-dir', state, '--json'], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);

  const experiment = {
    name: 'cancel-me', topology: 'star', inputs: { items: ['a', 'b', 'c', 'd', 'e', 'f'] },
    roles: { agent: { prompt: 'say {{item}}' } }, limits: { max_inflight: 3 },
  };
  const { run } = await api<{ run: string }>(state, 'POST', '/runs', { experiment });
  t.ok(run, 'run started');
  // Two tasks on the two workers, one queued behind them (max_inflight 3).
  t.ok(await until(async () => {
    const s = await api<Status>(state, 'GET', '/status');
    return s.tasks.leased === 2 && s.tasks.queued === 1;
  }, 60_000, 100), 'two tasks running, one queued');

  const c = swarm(['runs', 'cancel', run, '--reason', 'test: enough', '--state-dir', state, '--json']);
  t.equal(c.code, 0, c.stderr);
  const v = JSON.parse(c.stdout) as { cancelled: boolean; tasks_cancelled: number; state: string; outcome: { verdict: string; reason: string }; dir: string };
  t.equal(v.cancelled, true);
  t.equal(v.tasks_cancelled, 3, 'the three outstanding tasks were cancelled');
  t.equal(v.state, 'done');
  t.equal(v.outcome.verdict, 'cancelled');
  t.equal(v.outcome.reason, 'test: enough');

  // The workers were told: they stop the tasks and their slots come free (the hub counts a slot
  // until the worker answers), long before the 10-minute latency.
  t.ok(await until(async () => {
    const s = await api<Status>(state, 'GET', '/status');
    return s.workers.length === 2 && s.workers.every((w) => w.inflight === 0);
  }, 60_000, 100), 'both workers are free again');
  const s = await api<Status>(state, 'GET', '/status');
  t.same({ queued: s.tasks.queued, leased: s.tasks.leased }, { queued: 0, leased: 0 }, 'nothing left queued or leased');

  // Cancelled for good: journaled as failed with SWARM_ERR_CANCELLED, and no node issued after the cancel.
  const fails = journal(state).filter((r) => r.t === 'fail' && r.id?.startsWith(`${run}:`)) as unknown as { error: { code: string } }[];
  t.equal(fails.length, 3);
  t.ok(fails.every((f) => f.error.code === 'SWARM_ERR_CANCELLED'));
  const submitted = journal(state).filter((r) => r.t === 'task' && r.spec?.id.startsWith(`${run}:`));
  t.equal(submitted.length, 3, 'only the three nodes submitted before the cancel');

  const events = fs.readFileSync(path.join(v.dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; reason?: string; verdict?: string });
  t.match(events.find((e) => e.type === 'run_cancelled'), { reason: 'test: enough' });
  t.match(events.at(-1), { type: 'run_done', verdict: 'cancelled', reason: 'test: enough' });
  t.equal(events.filter((e) => e.type === 'node_submitted').length, 3);
  const result = JSON.parse(fs.readFileSync(path.join(v.dir, 'result.json'), 'utf8')) as { verdict: string; reason: string };
  t.match(result, { verdict: 'cancelled', reason: 'test: enough' });
  t.match(fs.readFileSync(path.join(v.dir, 'report.md'), 'utf8'), /verdict: \*\*cancelled\*\* — test: enough/);
  t.match(fs.readFileSync(path.join(v.dir, 'report.html'), 'utf8'), /cancelled/);

  const ls = swarm(['runs', 'ls', '--state-dir', state]);
  t.match(ls.stdout, new RegExp(`${run}\\s+star\\s+cancelled`));

  // Cancelling again says it had ended; an unknown run is SWARM_ERR_UNKNOWN_RUN (exit 2).
  const again = swarm(['runs', 'cancel', run, '--state-dir', state]);
  t.equal(again.code, 0, again.stderr);
  t.match(again.stdout, /had already ended: cancelled — test: enough/);
  const none = swarm(['runs', 'cancel', 'no-such-run', '--state-dir', state, '--json']);
  t.equal(none.code, 2);
  t.match(none.stdout + none.stderr, /SWARM_ERR_UNKNOWN_RUN/);
});
