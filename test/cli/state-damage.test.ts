import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { CLI, pidsMentioning, swarm, tempDir } from '../helpers/cli.js';

/**
 * State files damaged while no swarm runs, as a disk error, a careless edit or another tool leaves
 * them: `swarm up` either starts with nothing acknowledged lost or refuses with a code that says
 * which file and what to do, never SWARM_ERR_INTERNAL ("a bug").
 */
t.test('a damaged lock-id: up refuses naming the file and the remedy; once removed, up starts', async (t) => {
  const dir = tempDir(t);
  const up = () => swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(up().code, 0, 'a first swarm');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  const file = `${dir}/lock-id`;
  for (const damage of [() => fs.writeFileSync(file, 'garbage\u0000\n'), () => fs.writeFileSync(file, ''), () => fs.mkdirSync(file)]) {
    fs.rmSync(file, { recursive: true, force: true });
    damage();
    const r = up();
    t.equal(r.code, 2, 'refused as a configuration error, not a bug');
    t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: .*${file} is damaged.*rm -r ${file}`), 'names the file and the remedy');
    t.same(pidsMentioning(dir), [], 'no process left');
  }
  fs.rmSync(file, { recursive: true });
  t.equal(up().code, 0, 'with it removed, up starts');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});

t.test("another user's state directory: status, submit, down and results say they cannot read it, not that nothing runs", async (t) => {
  const dir = tempDir(t);
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, 'a swarm runs');
  t.teardown(() => { swarm(['down', '--state-dir', dir]); });
  // Another user: as root, the CLI runs as nobody; else the directory is shut to its own owner.
  const root = process.getuid?.() === 0;
  if (!root) { fs.chmodSync(dir, 0o000); t.teardown(() => fs.chmodSync(dir, 0o700)); }
  const as = (args: string[]) => {
    // env -i: tap hooks every child node (NODE_OPTIONS) to write files under the repo, which nobody may not.
    const r = root ? spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'env', '-i', `PATH=${process.env.PATH ?? ''}`, `HOME=${os.tmpdir()}`, process.execPath, CLI, ...args], { encoding: 'utf8', timeout: 30_000 })
      : spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });
    return { code: r.status, stderr: `${r.stderr}${r.error ?? ""}` };
  };
  for (const cmd of [['status'], ['submit', 'x'], ['down'], ['results']]) {
    const r = as([...cmd, '--state-dir', dir]);
    t.equal(r.code, 2, `${cmd[0]}: exit 2 (${r.stderr})`);
    t.match(r.stderr, /SWARM_ERR_STATE_ACCESS: cannot read /, `${cmd[0]}: says it cannot read the state directory`);
  }
  if (!root) fs.chmodSync(dir, 0o700);
  t.match(swarm(['status', '--state-dir', dir]).stdout, /workers {2}1/, 'the swarm still runs');
});

t.test('a copy of a state directory (cp -a, a restored backup) runs its own swarm beside the original, and down on one leaves the other', async (t) => {
  const base = tempDir(t);
  const a = `${base}/a`, b = `${base}/b`;
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', a], { timeoutMs: 60_000 }).code, 0, 'the original runs');
  t.equal(swarm(['down', '--state-dir', a]).code, 0);
  fs.cpSync(a, b, { recursive: true });
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', a], { timeoutMs: 60_000 }).code, 0, 'the original runs again');
  // Before, the copy's lock-id named the original's lock: "another hub is starting or running".
  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', b], { timeoutMs: 60_000 });
  t.equal(up.code, 0, `the copy starts too (${up.stderr.trim()})`);
  fs.rmSync(`${b}/hub.json`);
  t.equal(swarm(['down', '--timeout', '2000', '--state-dir', b], { timeoutMs: 60_000 }).code, 0, 'down on the copy');
  t.same(pidsMentioning(b), [], 'stops the copy');
  t.match(swarm(['status', '--state-dir', a]).stdout, /workers {2}1/, 'and leaves the original running');
  t.equal(swarm(['down', '--state-dir', a]).code, 0);
});

t.test('a file where the state directory goes (or in its path): every command says so, exit 2, and the file is left as it was', async (t) => {
  const root = tempDir(t);
  const file = path.join(root, 'state');
  fs.writeFileSync(file, 'my notes\n');
  // Before: up failed as a bug (SWARM_ERR_INTERNAL: EEXIST at mkdir), down called <file>/lock-id damaged
  // and said to remove it, status and submit said no swarm runs there.
  for (const [dir, says] of [[file, /is a file, not a directory/], [path.join(file, 'sub'), /cannot be: a part of its path is a file/]] as const) {
    for (const args of [['up', '--agents', '1', '--driver', 'echo', '--detach'], ['status'], ['submit', 'x'], ['down'], ['results']]) {
      const r = swarm([...args, '--state-dir', dir], { timeoutMs: 30_000 });
      t.equal(r.code, 2, `${args[0]} --state-dir ${dir}: exit 2 (${r.stderr.split('\n')[0]})`);
      t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: the state directory ${dir} ${says.source}`), `${args[0]}: says why`);
    }
  }
  // A hub named by --hub-url needs no state directory: the file there is no concern of status.
  const remote = swarm(['status', '--hub-url', 'http://127.0.0.1:1', '--token', 'some-token', '--state-dir', file], { timeoutMs: 30_000 });
  t.notMatch(remote.stderr, /state directory/, `status --hub-url does not look at the state directory (${remote.stderr.split('\n')[0]})`);
  t.match(remote.stderr, /127\.0\.0\.1:1/, 'it tried the hub named');
  t.equal(fs.readFileSync(file, 'utf8'), 'my notes\n', 'the file is untouched');
});
