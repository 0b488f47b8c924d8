import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { ROOT, alive, api, hubFile, pidsMentioning, swarm, swarmRun, tempDir, until, type SwarmRun } from '../helpers/cli.js';
import { startingProcs } from '../../cli/starting.js';

/**
 * Two `swarm down` at once on one state directory: the second found the hub half gone and said "no
 * swarm was running" (exit 0) while the first was still stopping it. A `swarm up` run meanwhile
 * started a hub beside the stopping swarm, and the first `down` counted its workers as left over.
 * The stop is made slow here by an engine that ignores SIGTERM (down waits 3 s for it, then kills
 * it), as a batched engine that is slow to exit does.
 */

/** A process `down` takes for the swarm's batched engine: it names the state directory's engines folder, and ignores SIGTERM. */
function slowEngine(t: { teardown(fn: () => void): void }, base: string, state: string): number {
  const script = path.join(base, 'batched', 'host.js');
  fs.mkdirSync(path.dirname(script), { recursive: true });
  fs.writeFileSync(script, "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);\n");
  fs.mkdirSync(path.join(state, 'engines'), { recursive: true });
  const c = spawn(process.execPath, [script, path.join(state, 'engines') + path.sep], { detached: true, stdio: 'ignore' });
  c.unref();
  t.teardown(() => { try { process.kill(c.pid!, 'SIGKILL'); } catch { /* gone */ } });
  return c.pid!;
}

/** The JSON line a command printed. */
const json = (out: string): Record<string, unknown> => JSON.parse(out.split('\n').find((l) => l.startsWith('{')) ?? '{}') as Record<string, unknown>;

/**
 * Start `swarm down`, wait until it has stopped the hub (hub.json gone) and is still at work, and
 * pause it there (SIGSTOP), so that what runs next meets a stop under way however slow it starts.
 */
async function downUnderWay(t: Test, state: string, args: string[] = [], run: (args: string[]) => SwarmRun = swarmRun) {
  const first = run(['down', '--state-dir', state, ...args]);
  let done = false;
  void first.exited.then(() => { done = true; });
  t.ok(await until(() => done || !fs.existsSync(path.join(state, 'hub.json')), 30_000, 5), 'the first down stopped the hub');
  try { process.kill(first.pid, 'SIGSTOP'); } catch { /* gone */ }
  t.teardown(() => { try { process.kill(first.pid, 'SIGCONT'); } catch { /* gone */ } });
  t.notOk(done, 'and is still stopping the rest');
  return first;
}

/** Once `next` waits for the paused `first` (says so), or has ended, let `first` go on. */
async function thenResume(first: { pid: number }, next: { out: string; code: number | null }): Promise<void> {
  await until(() => next.code !== null || /waiting for it/.test(next.out), 30_000);
  try { process.kill(first.pid, 'SIGCONT'); } catch { /* gone */ }
}

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

/** `swarm ARGS` as a user runs it: through its shebang, by a relative path (its command line is not node's argv). */
function asTyped(args: string[]): SwarmRun {
  const c = spawn('./dist/cli/main.js', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const run: SwarmRun = { pid: c.pid!, code: null, out: '', exited: new Promise((resolve) => c.on('exit', (code) => { run.code = code; resolve(); })) };
  c.stdout.on('data', (d: Buffer) => { run.out += d.toString(); });
  c.stderr.on('data', (d: Buffer) => { run.out += d.toString(); });
  return run;
}

t.test('a down killed while it stops: the one waiting finishes the stop; marks name `swarm` as /proc shows it', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
  // A `swarm up` typed by a user is found by its starting mark (its recorded command was node's argv,
  // never its command line, so every mark read as another process's and was removed).
  const up = asTyped(['up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '1', '--no-failover']);
  t.ok(await until(() => { try { return fs.readdirSync(path.join(state, 'starting')).length > 0; } catch { return false; } }, 30_000, 5), 'up marked the directory');
  t.same(startingProcs(state).map((p) => p.pid), [up.pid], 'its mark names it');
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
