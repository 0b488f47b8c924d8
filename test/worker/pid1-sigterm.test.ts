import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { CLI, alive, api, hubFile, journal, swarm, tempDir, until } from '../helpers/cli.js';

/**
 * Workers in containers: `node` is PID 1 (the image has no init), and `podman stop` or a k3s rolling
 * restart sends SIGTERM, waits 10 or 30 s, then SIGKILL. (PID 1 gets no signal it has no handler
 * for; node installs its own for SIGTERM and SIGINT at boot, so it stops even before ours is set.)
 * A worker stopped this way closed its link without a word: the hub requeued its leases at once but
 * counted each as an attempt, so a task that a rolling restart met `--max-attempts` times failed for
 * good. A stopping worker now gives each task back (SWARM_ERR_SHUTDOWN): requeued at once, no attempt.
 * Each worker runs as PID 1 of its own pid namespace (`unshare`) where this machine allows it.
 */

const pidns = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', '--user', '--map-root-user', 'true']).status === 0;

interface Worker { wrapper: ChildProcess; pid: number; out: () => string }

/** A worker as PID 1 of a new pid namespace (else a plain process); `pid` is node's pid here. */
async function startWorker(dir: string, id: string, opts: string[]): Promise<Worker> {
  const args = [CLI, 'worker', '--state-dir', dir, '--id', id, '--driver', 'echo', ...opts];
  const c = pidns
    ? spawn('unshare', ['--pid', '--fork', '--mount-proc', '--user', '--map-root-user', process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  c.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  c.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  let pid = c.pid!;
  if (pidns) {
    // unshare --fork: node is its child (PID 1 inside).
    await until(() => { try { pid = Number(fs.readFileSync(`/proc/${c.pid}/task/${c.pid}/children`, 'utf8').trim().split(/\s+/)[0]) || 0; } catch { pid = 0; } return pid > 0; }, 10_000);
  }
  return { wrapper: c, pid, out: () => out };
}

async function startHub(t: Test, dir: string, maxAttempts: number): Promise<void> {
  const hub = spawn(process.execPath, [CLI, 'hub', '--state-dir', dir, '--port', '0', '--max-attempts', String(maxAttempts)], { stdio: 'ignore' });
  t.teardown(() => { hub.kill('SIGKILL'); });
  t.ok(await until(() => hubFile(dir)?.pid === hub.pid, 30_000), 'hub up');
}

const workerIds = async (dir: string): Promise<string[]> => ((await api<{ workers: { id: string }[] }>(dir, 'GET', '/status')).workers ?? []).map((w) => w.id);

t.test('SIGTERM to a worker as PID 1: it stops at once, and its running task goes back without using an attempt', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  fs.mkdirSync(dir, { recursive: true });
  await startHub(t, dir, 1);
  let w = await startWorker(dir, 'c1', ['--driver-opt', 'latency_ms=4000']);
  t.teardown(() => { try { process.kill(w.pid, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await workerIds(dir)).includes('c1'), 30_000), 'worker joined');
  if (pidns) t.equal(/^NSpid:.*\s(\d+)$/m.exec(fs.readFileSync(`/proc/${w.pid}/status`, 'utf8'))?.[1], '1', 'the worker is PID 1 of its namespace');
  if (pidns) t.ok(await until(() => /running as PID 1 without an init/.test(w.out()), 10_000), 'and warns that it reaps no orphans there');
  await api(dir, 'POST', '/tasks', { tasks: [{ id: 'long', prompt: 'a long one' }] });
  t.ok(await until(async () => (await api<{ state: string }>(dir, 'GET', '/tasks/long')).state === 'leased', 30_000), 'the task runs');

  process.kill(w.pid, 'SIGTERM');
  t.ok(await until(() => !alive(w.pid), 10_000), 'the worker exited within podman stop\'s 10 s grace (no SIGKILL needed)');
  t.ok(await until(async () => (await api<{ state: string }>(dir, 'GET', '/tasks/long')).state === 'queued', 10_000), 'the task is queued again at once, not failed (max attempts 1)');

  w = await startWorker(dir, 'c2', ['--driver-opt', 'latency_ms=100']);
  t.ok(await until(async () => (await api<{ state: string }>(dir, 'GET', '/tasks/long')).state === 'done', 30_000), 'another worker runs it');
  const rec = await api<{ state: string; attempts: number; worker: string }>(dir, 'GET', '/tasks/long');
  t.equal(rec.worker, 'c2');
  t.equal(rec.attempts, 1, 'the handed-back lease used no attempt');
  process.kill(w.pid, 'SIGTERM');
  t.ok(await until(() => !alive(w.pid), 10_000));
});

t.test('a rolling restart of PID-1 workers while tasks flow: no task lost, failed or recorded twice', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  fs.mkdirSync(dir, { recursive: true });
  await startHub(t, dir, 2);
  const ids = ['r1', 'r2', 'r3'];
  // Failover on, as `swarm up` runs them.
  const opts = ['--driver-opt', 'latency_ms=300', '--slots', '2', '--failover'];
  const workers = new Map<string, Worker>();
  t.teardown(() => { for (const w of workers.values()) try { process.kill(w.pid, 'SIGKILL'); } catch { /* gone */ } });
  for (const id of ids) workers.set(id, await startWorker(dir, id, opts));
  t.ok(await until(async () => (await workerIds(dir)).length === 3, 30_000), 'three workers joined');
  const N = 150;
  const tasks = Array.from({ length: N }, (_, i) => ({ id: `t${i}`, prompt: `prompt ${i}` }));
  await api(dir, 'POST', '/tasks', { tasks });

  // Two rounds, one worker at a time, as a Deployment's rolling update does.
  const stopMs: number[] = [];
  for (let round = 0; round < 2; round++) {
    for (const id of ids) {
      const w = workers.get(id)!;
      const t0 = performance.now();
      process.kill(w.pid, 'SIGTERM');
      t.ok(await until(() => !alive(w.pid), 10_000), `${id} stopped on SIGTERM`);
      stopMs.push(Math.round(performance.now() - t0));
      workers.set(id, await startWorker(dir, id, opts));
      t.ok(await until(async () => (await workerIds(dir)).includes(id), 30_000), `${id} back`);
    }
  }
  t.comment(`SIGTERM to exit, ms: ${stopMs.join(', ')}`);
  t.ok(await until(async () => { const s = await api<{ tasks: { done: number; failed: number } }>(dir, 'GET', '/status'); return s.tasks.done + s.tasks.failed === N; }, 120_000), 'every task finished');
  let lost = 0, failed = 0;
  for (const { id } of tasks) {
    const r = await api<{ state: string }>(dir, 'GET', `/tasks/${id}`);
    if (r.state === 'failed') failed++; else if (r.state !== 'done') lost++;
  }
  const results = new Map<string, number>();
  for (const r of journal(dir)) if (r.t === 'result' && r.id) results.set(r.id, (results.get(r.id) ?? 0) + 1);
  const duplicated = [...results.values()].filter((n) => n > 1).length;
  const at = journal(dir).flatMap((r) => (r.t === 'result' ? [(r as unknown as { at: number }).at] : [])).sort((a, b) => a - b);
  t.comment(`longest gap between two results: ${Math.max(...at.slice(1).map((x, i) => x - at[i]!))} ms (tasks of 300 ms, 2 slots x 3 workers)`);
  t.same({ lost, failed, duplicated }, { lost: 0, failed: 0, duplicated: 0 }, 'lost/failed/duplicated');
  for (const w of workers.values()) process.kill(w.pid, 'SIGTERM');
  t.ok(await until(() => [...workers.values()].every((w) => !alive(w.pid)), 10_000));
  t.equal(swarm(['status', '--state-dir', dir]).code, 0);
});
