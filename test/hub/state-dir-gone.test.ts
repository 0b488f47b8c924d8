import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { alive, hubFile, pidsMentioning, swarm, tempDir, until } from '../helpers/cli.js';

/**
 * The state directory of a running swarm is deleted, or moved away and a new swarm started in its
 * place. The old hub must notice and stop with its workers: its journal is no longer where a
 * restart reads it, and no CLI can find it to stop it. A new swarm in the same place must be left
 * alone (its pid files and hub.json too), and the moved journal loses nothing.
 */

const N = 3;

function writeTasks(file: string, prefix: string, n: number): void {
  fs.writeFileSync(file, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${prefix}-${i}`, prompt: `${prefix} ${i}` })).join('\n') + '\n');
}

function workerPids(state: string): number[] {
  return fs.readdirSync(path.join(state, 'pids')).map((f) => {
    const text = fs.readFileSync(path.join(state, 'pids', f), 'utf8').trim();
    return text.startsWith('{') ? (JSON.parse(text) as { pid: number }).pid : Number(text);
  });
}

function submitAll(state: string, file: string): { done: number; texts: Map<string, string> } {
  const r = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  if (r.code !== 0) throw new Error(`submit: exit ${r.code}: ${r.stderr}`);
  const res = JSON.parse(r.stdout) as { tasks: { id: string; state: string; text: string }[] };
  return { done: res.tasks.filter((x) => x.state === 'done').length, texts: new Map(res.tasks.map((x) => [x.id, x.text])) };
}

t.test('rm -rf of a running swarm\'s state directory: the swarm stops, and `swarm up` there starts afresh', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  t.equal(swarm(['up', '-n', String(N), '--driver', 'echo', '--detach', '--state-dir', state]).code, 0);
  const file = path.join(dir, 'a.jsonl');
  writeTasks(file, 'a', 20);
  t.equal(submitAll(state, file).done, 20, 'the swarm answers');
  const pids = [hubFile(state)!.pid, ...workerPids(state)];
  t.equal(pids.length, N + 1);

  fs.rmSync(state, { recursive: true, force: true });
  t.ok(await until(() => pids.every((p) => !alive(p)), 30_000), 'the hub and every worker stopped');
  t.same(pidsMentioning(state), [], 'no process of the swarm is left');

  const again = swarm(['up', '-n', String(N), '--driver', 'echo', '--detach', '--state-dir', state]);
  t.equal(again.code, 0, again.stderr);
  t.equal(submitAll(state, file).done, 20, 'a new swarm in the same place answers');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.ok(await until(() => pidsMentioning(state).length === 0, 30_000), 'and stops cleanly');
});

t.test('the state directory moved away and a new swarm started in its place: the old one stops, the new one is untouched, the moved journal keeps every result', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const moved = path.join(dir, 'moved');
  t.teardown(() => { swarm(['down', '--state-dir', state]); swarm(['down', '--state-dir', moved]); });
  t.equal(swarm(['up', '-n', String(N), '--driver', 'echo', '--detach', '--state-dir', state]).code, 0);
  const fileA = path.join(dir, 'a.jsonl');
  writeTasks(fileA, 'a', 50);
  const before = submitAll(state, fileA);
  t.equal(before.done, 50);
  const oldPids = [hubFile(state)!.pid, ...workerPids(state)];

  // The old hub is held still until the new swarm has written its files, so it notices only then
  // (otherwise, on a fast machine, it could stop before there is anything of the new swarm to spare).
  process.kill(oldPids[0]!, 'SIGSTOP');
  t.teardown(() => { try { process.kill(oldPids[0]!, 'SIGCONT'); } catch { /* gone */ } });
  fs.renameSync(state, moved);
  const up = swarm(['up', '-n', String(N), '--driver', 'echo', '--detach', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  const newHub = hubFile(state)!.pid;
  const newPids = [newHub, ...workerPids(state)];
  t.equal(newPids.length, N + 1);
  t.notSame(newPids, oldPids);
  process.kill(oldPids[0]!, 'SIGCONT');

  t.ok(await until(() => oldPids.every((p) => !alive(p)), 30_000), 'the old hub and its workers stopped');
  t.ok(newPids.every(alive), 'the new swarm\'s processes all run');
  t.equal(hubFile(state)?.pid, newHub, 'the new hub.json is untouched');
  t.same(workerPids(state).sort(), newPids.slice(1).sort(), 'the new pid files are untouched');
  const fileB = path.join(dir, 'b.jsonl');
  writeTasks(fileB, 'b', 20);
  t.equal(submitAll(state, fileB).done, 20, 'the new swarm answers');

  // The moved directory is a complete state directory: a swarm started on it has every earlier result.
  t.equal(swarm(['up', '-n', '1', '--driver', 'echo', '--detach', '--state-dir', moved]).code, 0);
  const again = submitAll(moved, fileA);
  t.equal(again.done, 50, 'every earlier task is done');
  let changed = 0;
  for (const [id, text] of before.texts) if (again.texts.get(id) !== text) changed++;
  t.equal(changed, 0, 'no result changed or lost (resubmitted ids answer from the journal)');
  const st = JSON.parse(swarm(['status', '--json', '--state-dir', moved]).stdout) as { tasks: Record<string, number> };
  t.same(st.tasks, { queued: 0, leased: 0, done: 50, failed: 0 }, 'nothing was run twice or added');
});
