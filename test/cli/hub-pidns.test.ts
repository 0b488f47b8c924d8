import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { CLI, alive, swarm, tempDir, until } from '../helpers/cli.js';

/**
 * A hub in a pid namespace of its own (a container; here `unshare --pid`) wrote its pid there to
 * hub.json: PID 1. The host's CLI judged host PID 1 by it: `swarm status` said no swarm ran (exit 3),
 * and `swarm down` waited its whole timeout and found the hub only by its lock. hub.json now says
 * which namespace its pid is of; a reader finds the hub there, or judges it by its answer where it
 * cannot see that namespace, and never signals a process of its own namespace by that pid.
 */

const UNSHARE = ['--pid', '--fork', '--mount-proc', '--user', '--map-root-user'];
const pidns = spawnSync('unshare', [...UNSHARE, 'true']).status === 0;
const skip = pidns ? false : 'unshare --pid is not permitted here';

/** `swarm ARGS` run inside a new pid namespace. */
function swarmInNs(args: string[]) {
  const r = spawnSync('unshare', [...UNSHARE, process.execPath, CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A `swarm hub` on `dir`, in the current namespace or as PID 1 of a new one; its pid here. */
async function startHub(t: Test, dir: string, own: boolean): Promise<number> {
  const args = [CLI, 'hub', '--state-dir', dir, '--port', '0'];
  const c = own ? spawn('unshare', [...UNSHARE, process.execPath, ...args], { stdio: 'ignore' }) : spawn(process.execPath, args, { stdio: 'ignore' });
  let pid = own ? 0 : c.pid!;
  t.teardown(() => { try { process.kill(pid || c.pid!, 'SIGKILL'); } catch { /* gone */ } });
  // unshare --fork: node is its child.
  if (own) await until(() => { try { pid = Number(fs.readFileSync(`/proc/${c.pid}/task/${c.pid}/children`, 'utf8').trim().split(/\s+/)[0]) || 0; } catch { pid = 0; } return pid > 0; }, 10_000);
  t.ok(await until(() => fs.existsSync(path.join(dir, 'hub.json')), 30_000), 'the hub wrote hub.json');
  return pid;
}

const hubJson = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { pid: number; pidns?: string; proc_start?: string };

t.test('a hub as PID 1 of its own pid namespace: status, submit and down on the host find it there', { skip }, async (t) => {
  const dir = path.join(tempDir(t), 'state');
  const pid = await startHub(t, dir, true);
  const file = hubJson(dir);
  t.equal(file.pid, 1, 'hub.json names PID 1 (its pid in its namespace)');
  t.match(file.pidns, /^pid:\[\d+\]$/, 'and says which namespace that is');
  t.not(file.pidns, fs.readlinkSync('/proc/self/ns/pid'), 'another than this one');
  const st = swarm(['status', '--json', '--state-dir', dir]);
  t.equal(st.code, 0, `status finds the hub (${st.stderr.trim()})`);
  t.equal((JSON.parse(st.stdout) as { hub: { pid: number } }).hub.pid, 1);
  t.equal(swarm(['submit', '--state-dir', dir, '--id', 'ns-1', 'hello']).code, 0, 'submit reaches it');
  const down = swarm(['down', '--json', '--state-dir', dir]);
  t.equal(down.code, 0, down.stderr);
  t.match(JSON.parse(down.stdout), { stopped: true, clean: true, remaining: 0 }, 'down stops it by its API, as any hub');
  t.ok(await until(() => !alive(pid), 10_000), 'the hub process is gone');
  t.ok(alive(1), 'the host\'s PID 1 is untouched');
  t.match(swarm(['down', '--state-dir', dir]).stdout, /no swarm was running/, 'a second down finds nothing');
});

t.test('a CLI in another pid namespace than its hub judges the hub by its answer', { skip }, async (t) => {
  const dir = path.join(tempDir(t), 'state');
  const pid = await startHub(t, dir, false);
  t.equal(swarmInNs(['status', '--state-dir', dir]).code, 0, 'status from inside finds the host\'s hub');
  const up = swarmInNs(['up', '-d', '--driver', 'echo', '--agents', '1', '--state-dir', dir]);
  t.equal(up.code, 6, `up from inside is refused as already running (${up.stderr.trim()})`);
  const down = swarmInNs(['down', '--json', '--state-dir', dir]);
  t.equal(down.code, 0, down.stderr);
  t.match(JSON.parse(down.stdout), { stopped: true, clean: true, remaining: 0 });
  t.ok(await until(() => !alive(pid), 10_000), 'the hub stopped');
  const again = swarmInNs(['status', '--state-dir', dir]);
  t.equal(again.code, 3, 'a hub that does not answer is not running');
});

t.test('a hub.json of another pid namespace whose pid and start time are a process of this one: nothing is signalled', async (t) => {
  const dir = tempDir(t);
  const decoy = spawn('sleep', ['300'], { stdio: 'ignore', detached: true });
  t.teardown(() => { try { process.kill(decoy.pid!, 'SIGKILL'); } catch { /* gone */ } });
  await until(() => alive(decoy.pid!), 5000);
  const stat = fs.readFileSync(`/proc/${decoy.pid}/stat`, 'utf8');
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  // Nothing listens on port 1 of loopback: the hub it names does not answer.
  fs.writeFileSync(path.join(dir, 'hub.json'), JSON.stringify({ pid: decoy.pid, proc_start: start, pidns: 'pid:[1]', host: '127.0.0.1', port: 1, control: { host: '127.0.0.1', port: 1 }, started_at: 0, version: '0' }));
  const down = swarm(['down', '--json', '--timeout', '1000', '--state-dir', dir]);
  t.equal(down.code, 0, down.stderr);
  t.match(JSON.parse(down.stdout), { stopped: false, remaining: 0 });
  t.ok(alive(decoy.pid!), 'the process with that pid here survives');
  t.equal(swarm(['status', '--state-dir', dir]).code, 3, 'status: no running swarm');
});
