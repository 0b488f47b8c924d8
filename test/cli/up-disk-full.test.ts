// The state directory on a disk with no room, or a page or few. Before: `swarm up` said
// "SWARM_ERR_INTERNAL: ENOSPC: no space left on device, write" (no file named) or, once the hub died
// of it with nothing logged (its log is on that disk), "hub exited (code 1)" and "this is a bug", or
// waited out --ready-timeout; the hub's supervisor threw when it could not write a worker's pid file,
// which ended the hub at start with the worker process left running where `swarm down` could not
// find it, and crashed a running hub when it respawned a worker; each try left a *.tmp file behind.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import t, { type Test } from 'tap';
import { alive, hubFile, pidsMentioning, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { killGroup } from '../helpers/failover.js';
import { missingPrereq } from '../helpers/llama.js';

function mountTmpfs(dir: string, size: string): { missing: string } | object {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? {} : { missing: `needs a tmpfs (root): mount -t tmpfs failed: ${(r.stderr || r.error?.message || '').trim()}` };
}

/** A tmpfs for the test, unmounted at its end; undefined when it cannot be had (the test is then skipped, or failed under CI). */
function disk(t: Test, size: string): string | undefined {
  const d = path.join(tempDir(t), 'disk');
  if (missingPrereq(t, mountTmpfs(d, size))) return undefined;
  t.teardown(() => { spawnSync('umount', ['-l', d]); });
  return d;
}

/** Leave `pages` 4 KiB pages free on the disk of `d` (a filler file takes the rest). */
function leaveFree(d: string, pages: number): void {
  const filler = path.join(d, 'filler');
  fs.rmSync(filler, { force: true });
  const s = fs.statfsSync(d);
  const want = s.bavail * s.bsize - pages * 4096;
  if (want > 0) fs.writeFileSync(filler, Buffer.alloc(want));
}

const tmpFiles = (dir: string): string[] => (fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => /\.tmp$|\.tmp\.|lock-id\./.test(path.basename(f))) : []);
const others = (dir: string): number[] => pidsMentioning(dir).filter((p) => p !== process.pid);

t.test('swarm up on a full disk (0 to 200 KiB free): SWARM_ERR_DISK_FULL naming the directory, before anything starts; down exits 0; with room again it runs', async (t) => {
  const d = disk(t, '4m');
  if (!d) return;
  const dir = path.join(d, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 }); });
  for (const pages of [0, 1, 4, 10, 50]) {
    fs.rmSync(dir, { recursive: true, force: true });
    leaveFree(d, pages);
    const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 });
    const line = up.stderr.split('\n').find((l) => l.startsWith('swarm: ')) ?? '';
    t.equal(up.code, 1, `${pages} page(s) free: exit 1 (${line})`);
    t.match(line, new RegExp(`^swarm: SWARM_ERR_DISK_FULL: the disk of ${dir} is full \\(\\d+ bytes free\\): a swarm needs at least 1 MiB`), `${pages} page(s) free: a full disk, said so`);
    t.notMatch(up.stderr, /SWARM_ERR_INTERNAL|a bug/, `${pages} page(s) free: not as a bug`);
    t.same(tmpFiles(dir), [], `${pages} page(s) free: no temporary file left`);
    const down = swarm(['down', '--state-dir', dir], { timeoutMs: 60_000 });
    t.equal(down.code, 0, `${pages} page(s) free: down exits 0 (${down.stderr.trim() || down.stdout.trim()})`);
    t.same(others(dir), [], `${pages} page(s) free: no process left`);
  }
  // `down` on a full disk where no lock id was ever made: nothing runs, and it says so (it failed, ENOSPC).
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'starting'), { recursive: true });
  leaveFree(d, 0);
  const down = swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(down.code, 0, `down with no room for a lock id: exit 0 (${down.stderr.trim()})`);
  t.match(down.stdout, /no swarm was running/);

  fs.rmSync(path.join(d, 'filler'), { force: true });
  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(up.code, 0, `with room, up starts (${up.stderr.trim()})`);
  const sub = swarm(['submit', 'room again', '--wait', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(sub.code, 0);
  t.match(sub.stdout, /echo: room again/);
  t.equal(swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 }).code, 0);
});

t.test('a hub whose supervisor cannot write a worker\'s pid file (a page or few free) stops that process and keeps going; down then leaves no process', async (t) => {
  const d = disk(t, '4m');
  if (!d) return;
  const dir = path.join(d, 'state');
  for (const pages of [3, 4, 5, 6, 7]) {
    fs.rmSync(dir, { recursive: true, force: true });
    leaveFree(d, pages);
    const hub = swarmBg(['hub', '--state-dir', dir, '--supervise', '2', '--procs', '1', '--driver', 'echo']);
    t.teardown(() => killGroup(hub));
    // Up (hub.json) or gone (it could not even write that); then a few respawn rounds.
    await until(() => hubFile(dir)?.pid === hub.child.pid || hub.child.exitCode !== null, 20_000, 50);
    if (hub.child.exitCode === null) await until(() => hub.child.exitCode !== null, 2_000, 100);
    t.notMatch(hub.output(), /SWARM_ERR_INTERNAL/, `${pages} page(s) free: no internal error (${hub.output().split('\n').filter((l) => l.startsWith('swarm:')).join(' ')})`);
    const down = swarm(['down', '--state-dir', dir], { timeoutMs: 60_000 });
    t.equal(down.code, 0, `${pages} page(s) free: down exits 0`);
    t.ok(await until(() => others(dir).length === 0, 10_000, 100), `${pages} page(s) free: no process left after down: ${others(dir).join(' ')}`);
    t.same(tmpFiles(dir), [], `${pages} page(s) free: no temporary file left`);
    killGroup(hub);
  }
});

t.test('the disk fills under a running swarm and its worker process is killed: the hub stays up and respawns it once there is room; nothing lost or run twice', async (t) => {
  const d = disk(t, '8m');
  if (!d) return;
  const dir = path.join(d, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 }); });
  t.equal(swarm(['up', '--agents', '2', '--procs', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, 'a swarm runs');
  const hubPid = hubFile(dir)!.pid;
  const before = Array.from({ length: 20 }, (_, i) => ({ id: `pre-${i}`, prompt: `pre ${i}` }));
  t.equal(swarm(['submit', '--file', '-', '--wait', '--state-dir', dir], { input: before.map((x) => JSON.stringify(x)).join('\n') + '\n', timeoutMs: 60_000 }).code, 0, 'tasks run before the disk fills');
  const pidOf = () => { try { return (JSON.parse(fs.readFileSync(path.join(dir, 'pids', 'w-1.pid'), 'utf8')) as { pid: number }).pid; } catch { return undefined; } };
  const worker = pidOf()!;
  t.ok(worker && alive(worker), `the worker process (${worker})`);
  leaveFree(d, 0);
  try { process.kill(-worker, 'SIGKILL'); } catch { process.kill(worker, 'SIGKILL'); }
  // The supervisor respawns it within a second or two and cannot write its pid file, several times
  // over: what its old pid files freed is taken again at once (bounded: 4 s).
  const top = path.join(d, 'top-up');
  for (const end = Date.now() + 4000; Date.now() < end;) {
    const s = fs.statfsSync(d);
    if (s.bavail > 0) fs.appendFileSync(top, Buffer.alloc(s.bavail * s.bsize));
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(alive(hubPid), 'the hub is still up after respawns on a full disk (it crashed)');
  fs.rmSync(path.join(d, 'filler'), { force: true });
  fs.rmSync(top, { force: true });
  t.ok(await until(() => { const p = pidOf(); return p !== undefined && p !== worker && alive(p); }, 30_000, 200), 'with room, the worker process is respawned and recorded');
  const after = Array.from({ length: 20 }, (_, i) => ({ id: `post-${i}`, prompt: `post ${i}` }));
  const r = swarm(['submit', '--file', '-', '--wait', '--json', '--state-dir', dir], { input: [...before, ...after].map((x) => JSON.stringify(x)).join('\n') + '\n', timeoutMs: 60_000 });
  t.equal(r.code, 0, `every task done (${r.stderr.slice(0, 300)})`);
  const tasks = (JSON.parse(r.stdout) as { tasks: { id: string; state: string; text: string; receipt?: { attempt?: number } }[] }).tasks;
  const expect = new Map([...before, ...after].map((x) => [x.id, `echo: ${x.prompt}`]));
  const lost = [...expect.keys()].filter((id) => !tasks.some((x) => x.id === id && x.state === 'done')).length;
  const changed = tasks.filter((x) => x.text !== expect.get(x.id)).length;
  const results = swarm(['status', '--json', '--state-dir', dir]);
  const done = (JSON.parse(results.stdout) as { tasks: { done: number } }).tasks.done;
  t.same({ lost, changed, duplicated: done - expect.size }, { lost: 0, changed: 0, duplicated: 0 }, 'lost, changed, duplicated: 0');
  t.equal(swarm(['down', '--state-dir', dir], { timeoutMs: 30_000 }).code, 0);
  t.same(others(dir), [], 'no process left');
});
