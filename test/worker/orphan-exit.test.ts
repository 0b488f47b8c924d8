import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CLI, alive, sleep, swarmBg, tempDir, until } from '../helpers/cli.js';
import { hubStatus, killGroup, startHub } from '../helpers/failover.js';

/**
 * A worker outlives its swarm by a bound, with real processes: started through a shell that exits at
 * once (its parent gone, as for a worker leaked by an interrupted test), it keeps its hub while the
 * hub lives, then exits `--orphan-exit-ms` after the hub died, with a clear line. One whose parent
 * lives, or that sees failover peers, keeps going.
 */
const BOUND = 2000;

/** `swarm worker …` under a shell; `orphan()` kills the shell (SIGKILL), leaving the worker without its parent. */
async function shellWorker(dir: string, args: string[]): Promise<{ pid: number; orphan: () => void }> {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const line = [process.execPath, CLI, 'worker', '--state-dir', dir, '--driver', 'echo', ...args].map(q).join(' ');
  const sh = spawn('/bin/sh', ['-c', `${line} </dev/null >/dev/null 2>${q(path.join(dir, 'orphan.err'))} & echo $!; wait`], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  sh.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  await until(() => out.includes('\n'), 10_000, 10);
  return { pid: Number(out.trim()), orphan: () => sh.kill('SIGKILL') };
}

const workers = async (dir: string) => (await hubStatus(dir))?.workers.length ?? 0;

t.test('an orphaned worker exits the bound after its hub died, saying why', async (t) => {
  const dir = tempDir(t);
  const hub = await startHub(dir);
  t.teardown(() => killGroup(hub));
  const log = path.join(dir, 'orphan.log');
  const { pid, orphan } = await shellWorker(dir, ['--id', 'orphan', '--orphan-exit-ms', String(BOUND), '--log-file', log]);
  t.teardown(() => { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await workers(dir)) === 1, 20_000, 50), 'the worker joined');
  orphan();
  await sleep(3 * BOUND);
  t.ok(alive(pid), 'no parent, but linked to its hub: it stays');
  killGroup(hub);
  t.ok(await until(() => !alive(pid), 30_000, 100), 'the hub gone too: it exits');
  t.match(fs.readFileSync(path.join(dir, 'orphan.err'), 'utf8'), /SWARM_ERR_NO_SWARM: orphaned worker exiting: its parent process is gone and it reached no hub and saw no failover peer/, 'stderr says why, with the code');
  t.match(fs.readFileSync(log, 'utf8'), /"code":"SWARM_ERR_NO_SWARM".*orphaned worker exiting/, 'and so does its log');
});

t.test('a worker whose parent lives, or that sees failover peers, waits for its hub past the bound', async (t) => {
  const dir = tempDir(t);
  const hub = await startHub(dir);
  t.teardown(() => killGroup(hub));
  // The parent is this test process, alive throughout.
  const child = swarmBg(['worker', '--state-dir', dir, '--driver', 'echo', '--id', 'kept', '--orphan-exit-ms', String(BOUND)]);
  t.teardown(() => killGroup(child));
  // Orphaned, but two failover members of one process: each sees the other.
  const { pid, orphan } = await shellWorker(dir, ['--id', 'pair', '--count', '2', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir, 'pair.log')]);
  t.teardown(() => { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await workers(dir)) === 3, 20_000, 50), 'all joined');
  orphan();
  killGroup(hub);
  await sleep(5 * BOUND);
  t.ok(alive(child.child.pid!), 'parent alive: still reconnecting');
  t.ok(alive(pid), 'failover members that see each other: still running');
  t.notMatch(fs.readFileSync(path.join(dir, 'pair.log'), 'utf8'), /orphaned worker exiting/);
});
