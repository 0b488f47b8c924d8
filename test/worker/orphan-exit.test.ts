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
 * lives, or that sees failover peers in another process, keeps going.
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

t.test('a worker whose parent lives, or that sees failover peers in another process, waits for its hub past the bound; agents of one process do not keep it', async (t) => {
  const dir = tempDir(t);
  const hub = await startHub(dir);
  t.teardown(() => killGroup(hub));
  // The parent is this test process, alive throughout.
  const child = swarmBg(['worker', '--state-dir', dir, '--driver', 'echo', '--id', 'kept', '--orphan-exit-ms', String(BOUND)]);
  t.teardown(() => killGroup(child));
  // Orphaned, two failover processes that see each other.
  const a = await shellWorker(dir, ['--id', 'peer-a', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir, 'peer-a.log')]);
  const b = await shellWorker(dir, ['--id', 'peer-b', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir, 'peer-b.log')]);
  // Orphaned, two failover agents of one process, the only process of its own swarm: they see only each other.
  const dir2 = tempDir(t);
  const hub2 = await startHub(dir2);
  t.teardown(() => killGroup(hub2));
  const pair = await shellWorker(dir2, ['--id', 'pair', '--count', '2', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir2, 'pair.log')]);
  for (const w of [a, b, pair]) t.teardown(() => { try { process.kill(w.pid, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await workers(dir)) === 3 && (await workers(dir2)) === 2, 20_000, 50), 'all joined');
  for (const w of [a, b, pair]) w.orphan();
  killGroup(hub);
  killGroup(hub2);
  t.ok(await until(() => !alive(pair.pid), 30_000, 100), 'agents of one process alone: it exits');
  t.match(fs.readFileSync(path.join(dir2, 'pair.log'), 'utf8'), /orphaned worker exiting/, 'saying why');
  await sleep(3 * BOUND);
  t.ok(alive(child.child.pid!), 'parent alive: still reconnecting');
  t.ok(alive(a.pid) && alive(b.pid), 'failover processes that see each other: still running');
  for (const f of ['peer-a.log', 'peer-b.log']) t.notMatch(fs.readFileSync(path.join(dir, f), 'utf8'), /orphaned worker exiting/, `${f}: no exit`);
});
