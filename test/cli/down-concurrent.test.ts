import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { alive, pidsMentioning, swarm, swarmRun, tempDir, until } from '../helpers/cli.js';
import { asTyped, downUnderWay, json, slowEngine, thenResume } from '../helpers/stop-under-way.js';
import { startingProcs } from '../../cli/starting.js';

/**
 * Two `swarm down` at once on one state directory: the second found the hub half gone and said "no
 * swarm was running" (exit 0) while the first was still stopping it (`swarm up` meanwhile:
 * test/cli/up-during-down.test.ts). The stop is made slow here by an engine that ignores SIGTERM
 * (down waits 3 s for it, then kills it), as a batched engine that is slow to exit does.
 */

t.test('two swarm down at once: the second waits for the first\'s stop and says so; a third says nothing was running', async (t) => {
  const base = tempDir(t);
  for (const mode of ['json', 'text'] as const) {
    const state = path.join(base, `state-${mode}`);
    t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
    t.equal(swarm(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover']).code, 0, `${mode}: up`);
    const engine = slowEngine(t, base, state);
    const first = await downUnderWay(t, state, ['--json']);
    const second = swarmRun(['down', '--state-dir', state, ...(mode === 'json' ? ['--json'] : [])]);
    await thenResume(first, second);
    await Promise.all([first.exited, second.exited]);
    t.equal(first.code, 0, `${mode}: the first down exits 0 (${first.out.trim()})`);
    t.match(json(first.out), { stopped: true, remaining: 0 }, `${mode}: the first down stopped the swarm`);
    t.equal(second.code, 0, `${mode}: the second down exits 0 (${second.out.trim()})`);
    if (mode === 'json') t.match(json(second.out), { stopped: false, remaining: 0, other_down: first.pid }, 'the second names the down it waited for');
    else {
      t.match(second.out, new RegExp(`waiting for it[\\s\\S]*stopped by another \`swarm down\` \\(pid ${first.pid}\\)`), 'the second says another down stopped it');
      t.notMatch(second.out, /no swarm was running/);
    }
    t.notOk(alive(engine), `${mode}: the engine was stopped`);
    t.same(pidsMentioning(state), [], `${mode}: nothing of the state directory is alive`);
    t.notOk(fs.existsSync(path.join(state, 'stopping.json')), `${mode}: no stop record left`);
    const third = swarm(['down', '--state-dir', state]);
    t.equal(third.code, 0);
    t.match(third.stdout, /no swarm was running/, `${mode}: a down after the stop says nothing was running`);
  }
});

t.test('a down killed while it stops: the one waiting finishes the stop; marks name `swarm` as /proc shows it', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
  // A `swarm up` typed by a user is found by its starting mark (its recorded command was node's argv,
  // never its command line, so every mark read as another process's and was removed).
  const up = asTyped(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover']);
  // The mark itself (<pid>.json), read in the same look: it is written to a temporary file renamed
  // into place, and that file alone (which startingProcs passes over) read as no mark under load.
  let marked: number[] = [];
  t.ok(await until(() => {
    try { if (!fs.readdirSync(path.join(state, 'starting')).some((n) => /^\d+\.json$/.test(n))) return false; } catch { return false; }
    marked = startingProcs(state).live.map((p) => p.pid);
    return true;
  }, 30_000, 5), 'up marked the directory');
  t.same(marked, [up.pid], 'its mark names it');
  await up.exited;
  t.equal(up.code, 0, up.out);
  const engine = slowEngine(t, base, state);
  const first = await downUnderWay(t, state, ['--json'], asTyped);
  const second = swarmRun(['down', '--state-dir', state, '--json']);
  t.ok(await until(() => /waiting for it/.test(second.out), 30_000), 'the second down waits');
  t.match(second.out, new RegExp(`another \`swarm down\` \\(pid ${first.pid}\\)`), 'and names the first by its pid');
  process.kill(first.pid, 'SIGKILL');
  await second.exited;
  t.equal(second.code, 0, second.out);
  t.match(json(second.out), { remaining: 0, other_down: first.pid, other_down_finished: false }, 'it says the first ended before it finished');
  t.notOk(alive(engine), 'and finished the stop itself (the engine)');
  t.same(pidsMentioning(state), [], 'nothing of the state directory is alive');
});
