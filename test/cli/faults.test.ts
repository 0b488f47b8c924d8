import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { alive, api, hubFile, journal, pidsMentioning, swarm, swarmBg, until, tempDir } from '../helpers/cli.js';

interface Status { workers: { id: string; pid?: number; inflight: number }[]; tasks: { queued: number; leased: number; done: number; failed: number }; metrics: { duplicate_results: number } }

t.test('kill -9 of a worker mid-task: the task completes on another worker, recorded once', async (t) => {
  const state = tempDir(t);
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  // A process per agent: the others live on (test/cli/procs.test.ts kills a process of several).
  const up = swarm(['up', '--agents', '3', '--procs', '3', '--detach', '--state-dir', state, '--driver', 'echo', '--driver-opt', 'latency_ms=1500', '--dead-after-ms', '2000', '--heartbeat-ms', '200']);
  t.equal(up.code, 0, up.stderr);
  await api(state, 'POST', '/tasks', { id: 'victim', prompt: 'survive' });
  let holder: { id: string; pid?: number } | undefined;
  await until(async () => {
    const s = await api<Status>(state, 'GET', '/status');
    holder = s.workers.find((w) => w.inflight > 0);
    return holder !== undefined;
  }, 5000);
  t.ok(holder?.pid, `task leased to ${holder?.id}`);
  process.kill(holder!.pid!, 'SIGKILL');
  const done = await until(async () => (await api<{ state: string }>(state, 'GET', '/tasks/victim')).state === 'done', 60_000, 50);
  t.ok(done, 'task finished after its worker was killed');
  const rec = await api<{ state: string; text: string; worker: string; attempts: number }>(state, 'GET', '/tasks/victim');
  t.equal(rec.text, 'echo: survive');
  t.not(rec.worker, holder!.id, 'another worker finished it');
  const s = await api<Status>(state, 'GET', '/status');
  t.equal(s.tasks.done, 1, 'recorded once');
  t.equal(s.metrics.duplicate_results, 0);
  t.equal(journal(state).filter((r) => r.t === 'result' && r.id === 'victim').length, 1, 'journal holds one result');
});

t.test('kill -9 of the hub mid-run, then restart: nothing accepted is lost, nothing duplicated', async (t) => {
  const state = tempDir(t);
  const N = 400;
  const common = ['--state-dir', state, '--heartbeat-ms', '200', '--dead-after-ms', '2000'];
  // Workers run in their own process so they outlive the hub and reconnect to the new one.
  const hub1 = swarmBg(['hub', ...common]);
  t.ok(await until(() => hubFile(state)?.pid === hub1.child.pid, 60_000), 'hub 1 up');
  const workers = swarmBg(['worker', '--count', '8', '--id', 'k', '--state-dir', state, '--driver', 'echo', '--driver-opt', 'latency_ms=20']);
  t.teardown(() => {
    try { process.kill(-workers.child.pid!, 'SIGKILL'); } catch { /* gone */ }
    swarm(['down', '--state-dir', state]);
  });
  await until(async () => (await api<Status>(state, 'GET', '/status')).workers.length === 8, 60_000);
  const tasks = Array.from({ length: N }, (_, i) => ({ id: `r-${i}`, prompt: `n${i}` }));
  const acc = await api<{ accepted: unknown[] }>(state, 'POST', '/tasks', { tasks });
  t.equal(acc.accepted.length, N, 'all accepted (journaled)');
  await until(async () => (await api<Status>(state, 'GET', '/status')).tasks.done >= N / 4, 20_000, 10);
  const before = (await api<Status>(state, 'GET', '/status')).tasks.done;
  process.kill(hub1.child.pid!, 'SIGKILL');
  t.ok(await until(() => !alive(hub1.child.pid!), 30_000), 'hub 1 is dead');
  t.ok(before < N, `killed mid-run with ${before}/${N} done`);

  const hub2 = swarmBg(['hub', ...common]);
  t.teardown(() => { try { process.kill(-hub2.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => hubFile(state)?.pid === hub2.child.pid, 60_000), 'hub 2 up on the same state dir');
  const finished = await until(async () => {
    const s = await api<Status>(state, 'GET', '/status').catch(() => undefined);
    return s !== undefined && s.tasks.done + s.tasks.failed >= N;
  }, 60_000, 100);
  t.ok(finished, 'the run completed after the restart');
  const s = await api<Status>(state, 'GET', '/status');
  t.same(s.tasks, { queued: 0, leased: 0, done: N, failed: 0 }, 'every task done');
  const results = journal(state).filter((r) => r.t === 'result');
  const perTask = new Map<string, number>();
  for (const r of results) perTask.set(r.id!, (perTask.get(r.id!) ?? 0) + 1);
  const lost = tasks.filter((x) => !perTask.has(x.id)).length;
  const duplicated = [...perTask.values()].filter((n) => n > 1).length;
  t.comment(`lost=${lost} duplicated=${duplicated}`);
  t.equal(lost, 0, 'lost results');
  t.equal(duplicated, 0, 'duplicated results');
  for (const x of tasks.slice(0, 5)) t.equal((await api<{ text: string }>(state, 'GET', `/tasks/${x.id}`)).text, `echo: ${x.prompt}`);
  t.ok(fs.existsSync(path.join(state, 'journal.ndjson')));
  void pidsMentioning;
});
