import t from 'tap';
import path from 'node:path';
import { alive, hubFile, pidsMentioning, sleep, swarm, swarmRun, tempDir, until, type SwarmRun } from '../helpers/cli.js';

/**
 * Two `swarm up` on one state directory started at the same moment: each found no hub.json, and both
 * ran a hub appending to the same journal (the one hub.json did not name unreachable, holding its
 * worker). One of them must be refused; a kill -9 of the winner must not leave the directory locked.
 */

/** `swarm up` in the foreground (detached: -d did not show the race), or with -d. */
function up(state: string, detach = false): SwarmRun {
  return swarmRun(['up', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover', '--ready-timeout', '30000', ...(detach ? ['-d'] : [])]);
}

t.test('two swarm up at once on one state directory: exactly one hub runs, the other is refused (exit 6)', async (t) => {
  const base = tempDir(t);
  for (let round = 0; round < 5; round++) {
    const state = path.join(base, `state${round}`);
    const runs = [up(state), up(state)];
    t.teardown(() => { for (const r of runs) if (r.code === null) try { process.kill(r.pid, 'SIGKILL'); } catch { /* gone */ } });
    await until(() => runs.some((r) => r.code !== null) && runs.some((r) => r.out.includes('foreground')), 30_000, 50);
    // The loser, if any, has had time to be refused: a hub of its own would be listening by now.
    await sleep(1500);
    const refused = runs.filter((r) => r.code === 6).length;
    const running = runs.filter((r) => r.code === null).length;
    t.same({ refused, running }, { refused: 1, running: 1 }, `round ${round}: one runs, one is refused (${runs.map((r) => r.out.trim().split('\n').at(-1) ?? '').join(' | ')})`);
    t.equal(swarm(['down', '--state-dir', state]).code, 0);
    await Promise.all(runs.map((r) => Promise.race([r.exited, sleep(15_000)])));
    t.ok(await until(() => pidsMentioning(state).length === 0, 10_000), `round ${round}: no process of it left`);
  }
});

t.test('a hub killed -9 leaves no lock: swarm up there starts again', async (t) => {
  const state = path.join(tempDir(t), 'state');
  const first = up(state, true);
  await first.exited;
  t.equal(first.code, 0);
  const pid = hubFile(state)!.pid;
  process.kill(pid, 'SIGKILL');
  t.ok(await until(() => !alive(pid), 5000), 'hub killed');
  await sleep(100);
  const again = up(state, true);
  await again.exited;
  t.equal(again.code, 0, again.out.trim().split('\n').at(-1) ?? '');
  t.not(hubFile(state)?.pid, pid, 'a new hub');
});
