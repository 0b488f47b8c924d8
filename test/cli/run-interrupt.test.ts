import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { api, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';

interface Status { workers: { id: string; inflight: number }[]; tasks: { queued: number; leased: number; done: number; failed: number } }

t.test('Ctrl-C in swarm run cancels the run on the hub: its tasks stop, the folder says cancelled, exit 130', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  // Tasks that take 10 minutes: only the cancel can end this run within the test's bounds.
  const up = swarm(['up', '--detach', '--agents', '2', '--driver', 'echo', '--driver-opt', 'latency_ms=600000', '--state-dir', state, '--json'], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);
  const file = path.join(dir, 'slow.json');
  fs.writeFileSync(file, JSON.stringify({ name: 'interrupt-me', topology: 'star', inputs: { items: ['a', 'b', 'c', 'd'] }, roles: { agent: { prompt: 'say {{item}}' } } }));

  const run = swarmBg(['run', file, '--state-dir', state, '--json']);
  const exited = new Promise<number | null>((r) => run.child.once('exit', (code) => r(code)));
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).tasks.leased === 2, 60_000, 100), 'the run is under way on both workers');
  run.child.kill('SIGINT');
  const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 60_000).unref())]);
  if (code === 'timeout') run.child.kill('SIGKILL');
  t.equal(code, 130, `exit 130 (interrupted): ${run.output().slice(-500)}`);
  const view = JSON.parse(run.output().trim().split('\n').filter((l) => l.startsWith('{')).at(-1) ?? '{}') as { state?: string; outcome?: { verdict: string; reason: string }; dir?: string };
  t.equal(view.state, 'done');
  t.match(view.outcome, { verdict: 'cancelled', reason: /Ctrl-C/ });
  t.match(JSON.parse(fs.readFileSync(path.join(view.dir!, 'result.json'), 'utf8')), { verdict: 'cancelled' });
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).workers.every((w) => w.inflight === 0), 60_000, 100), 'both workers are free again');
  const s = await api<Status>(state, 'GET', '/status');
  t.same({ queued: s.tasks.queued, leased: s.tasks.leased, done: s.tasks.done }, { queued: 0, leased: 0, done: 0 }, 'nothing left running, nothing answered');
});
