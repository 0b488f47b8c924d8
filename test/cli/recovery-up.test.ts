import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { alive, api, hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { hubDone, hubStatus, killGroup, startHub, submit, type Proc } from '../helpers/failover.js';
import { Checker, journalResults, type FinalTask } from '../helpers/checker.js';

const workerPids = (dir: string): number[] => fs.readdirSync(path.join(dir, 'pids')).filter((n) => n.endsWith('.pid'))
  .map((n) => JSON.parse(fs.readFileSync(path.join(dir, 'pids', n), 'utf8')).pid as number).sort();

t.test('swarm up after its hub was killed -9 mid-run: same token, the workers are kept, every task done once', async (t) => {
  const dir = tempDir(t);
  const N = 4, TASKS = 300;
  const upArgs = ['up', '--agents', String(N), '--driver', 'echo', '--driver-opt', 'latency_ms=40', '--detach', '--json', '--state-dir', dir];
  const up = swarm(upArgs);
  t.equal(up.code, 0, up.stderr);
  const token = hubFile(dir)!.token;
  t.ok(token, 'the hub has a token');
  t.equal(fs.statSync(path.join(dir, 'token')).mode & 0o777, 0o600, 'stored 0600');
  const checker = new Checker();
  const ids = await submit(dir, TASKS);
  checker.acceptedIds(ids);
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= 30, 30_000, 50), 'the run is under way');
  const pids = workerPids(dir);
  const hubPid = hubFile(dir)!.pid;
  process.kill(hubPid, 'SIGKILL');
  t.ok(await until(() => !alive(hubPid), 5000), 'hub gone');

  const again = swarm(upArgs);
  t.equal(again.code, 0, `second swarm up exits 0: ${again.stdout}${again.stderr}`);
  t.equal(hubFile(dir)!.token, token, 'the restarted hub kept the token');
  t.same(workerPids(dir), pids, 'the surviving workers were adopted, not replaced');
  t.ok(pids.every(alive), 'and not killed');
  t.ok(await hubDone(dir, TASKS, 60_000), 'every task is final on the new hub');
  const st = await hubStatus(dir);
  t.equal(st?.tasks.failed, 0, 'none failed');
  t.equal(st!.tasks.queued + st!.tasks.leased + st!.tasks.done + st!.tasks.failed, TASKS, 'no task the client was not told about');
  const final = await api<{ tasks: FinalTask[] }>(dir, 'POST', '/wait', { ids, timeout_ms: 0 });
  const v = checker.check(final.tasks, { expect: (id) => `echo: task ${id}`, resultRecords: journalResults(dir), mustFinish: true });
  t.comment(`lost=${v.lost} duplicated=${v.duplicated} changed=${v.changed} unexpected=${v.unexpected} ${v.details.join('; ')}`);
  t.same({ ...v, details: undefined }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0, details: undefined }, 'what clients were told is what the hub holds');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});

t.test('swarm hub --state-dir keeps its token across a restart; without one it makes and stores one', async (t) => {
  const dir = tempDir(t);
  let hub: Proc | undefined;
  t.teardown(() => killGroup(hub));
  hub = await startHub(dir);
  const token = hubFile(dir)!.token;
  t.ok(token && token.length >= 16, 'a hub started without --token has one');
  t.equal(fs.readFileSync(path.join(dir, 'token'), 'utf8').trim(), token);
  const res = await fetch(`http://${hubFile(dir)!.control.host}:${hubFile(dir)!.control.port}/status`);
  t.equal(res.status, 401, 'the control API asks for it');
  killGroup(hub);
  hub = await startHub(dir);
  t.equal(hubFile(dir)!.token, token, 'a restarted hub uses the same token');
  t.ok((await api<{ hub?: unknown }>(dir, 'GET', '/status')).hub, 'and answers with it');
});

t.test('stale pid files: swarm down and swarm up signal or adopt no process this swarm did not start', async (t) => {
  const dir = tempDir(t);
  const sleeper = spawn('sleep', ['300'], { stdio: 'ignore', detached: true });
  t.teardown(() => { try { process.kill(sleeper.pid!, 'SIGKILL'); } catch { /* gone */ } });
  const pidDir = path.join(dir, 'pids');
  fs.mkdirSync(pidDir, { recursive: true });
  // An old-style pid file, and one whose start time is not the process's: both name the sleeper.
  fs.writeFileSync(path.join(pidDir, 'w-1.pid'), String(sleeper.pid));
  fs.writeFileSync(path.join(pidDir, 'pool-2.pid'), JSON.stringify({ pid: sleeper.pid, start: '1', cmd: 'node main.js worker' }));
  // A hub.json left by a hub that died, its pid now the sleeper's.
  fs.writeFileSync(path.join(dir, 'hub.json'), JSON.stringify({ pid: sleeper.pid, host: '127.0.0.1', port: 0, control: { host: '127.0.0.1', port: 0 }, proc_start: '1', started_at: 0, version: '0' }));
  const down = swarm(['down', '--json', '--state-dir', dir]);
  t.equal(down.code, 0, down.stderr);
  t.match(JSON.parse(down.stdout), { stopped: false, killed_leftovers: 0, not_ours: [sleeper.pid] });
  t.ok(alive(sleeper.pid!), 'the unrelated process survives swarm down');

  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--json', '--state-dir', dir]);
  t.equal(up.code, 0, `swarm up is not fooled into "already running" or adopting: ${up.stdout}${up.stderr}`);
  const w1 = JSON.parse(fs.readFileSync(path.join(pidDir, 'w-1.pid'), 'utf8')) as { pid: number };
  t.not(w1.pid, sleeper.pid, 'a new worker was started instead of adopting the foreign pid');
  const s = await hubStatus(dir);
  t.equal(s?.workers.length, 1, 'and it joined');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  t.ok(alive(sleeper.pid!), 'the unrelated process survives swarm up and a second swarm down');
});
