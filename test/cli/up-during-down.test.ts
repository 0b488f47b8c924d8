import t from 'tap';
import path from 'node:path';
import { alive, api, hubFile, pidsMentioning, swarm, swarmRun, tempDir, until } from '../helpers/cli.js';
import { downUnderWay, json, slowEngine, thenResume } from '../helpers/stop-under-way.js';

/**
 * `swarm up` while a `swarm down` stops the swarm of its state directory: it started a hub beside the
 * stopping one, and the `down` counted the new swarm's workers as its own leftovers (exit 1). It now
 * waits for the stop to end. The stop is made slow by an engine that ignores SIGTERM.
 */

t.test('swarm up while swarm down stops the swarm: up waits for the stop, down reports the truth, the journal is kept', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
  t.equal(swarm(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover']).code, 0, 'up');
  t.equal(swarm(['submit', '--state-dir', state, '--id', 'kept-1', '--wait', 'before the stop']).code, 0, 'a task done before the stop');
  slowEngine(t, base, state);
  const down = await downUnderWay(t, state, ['--json']);
  const up = swarmRun(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover']);
  await thenResume(down, up);
  await Promise.all([down.exited, up.exited]);
  t.equal(down.code, 0, `down exits 0 (${down.out.trim()})`);
  t.match(json(down.out), { stopped: true, remaining: 0 }, 'down counts nothing of the new swarm as its own left over');
  t.equal(up.code, 0, `up exits 0 (${up.out.trim()})`);
  t.match(up.out, /is stopping the swarm in .*waiting for it to finish/, 'up said it waited for the stop');
  const hub = hubFile(state);
  t.ok(hub && alive(hub.pid), 'the new hub runs');
  const task = await api<{ state: string; result?: { text: string } }>(state, 'GET', '/tasks/kept-1');
  t.equal(task.state, 'done', 'the task done before the stop is still known, with its result');
  t.equal(swarm(['submit', '--state-dir', state, '--id', 'after-1', '--wait', 'after the restart']).code, 0, 'the new swarm runs tasks');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.ok(await until(() => pidsMentioning(state).length === 0, 10_000), 'nothing of the state directory is left');
});
