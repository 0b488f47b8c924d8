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
 * lives keeps going, and so does an orphan that sees it as a failover peer; orphans that see only
 * each other (they gossip that they are orphaned) all go.
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

t.test('orphaned failover processes that see each other all exit; one with a live parent keeps itself and its orphaned peer going; agents of one process do not keep it', async (t) => {
  // Swarm 1: two orphaned failover processes, each the other's only peer.
  const dir = tempDir(t);
  const hub = await startHub(dir);
  t.teardown(() => killGroup(hub));
  const a = await shellWorker(dir, ['--id', 'peer-a', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir, 'peer-a.log')]);
  const b = await shellWorker(dir, ['--id', 'peer-b', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir, 'peer-b.log')]);
  // Swarm 2: an orphaned failover process whose peer's parent is this test process, alive throughout,
  // and a worker without failover whose parent lives too.
  const dir3 = tempDir(t);
  const hub3 = await startHub(dir3);
  t.teardown(() => killGroup(hub3));
  const kept = swarmBg(['worker', '--state-dir', dir3, '--driver', 'echo', '--id', 'kept', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir3, 'kept.log')]);
  t.teardown(() => killGroup(kept));
  const plain = swarmBg(['worker', '--state-dir', dir3, '--driver', 'echo', '--id', 'plain', '--orphan-exit-ms', String(BOUND)]);
  t.teardown(() => killGroup(plain));
  const c = await shellWorker(dir3, ['--id', 'peer-c', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir3, 'peer-c.log')]);
  // Swarm 3: two failover agents of one process, the only process of its own swarm: they see only each other.
  const dir2 = tempDir(t);
  const hub2 = await startHub(dir2);
  t.teardown(() => killGroup(hub2));
  const pair = await shellWorker(dir2, ['--id', 'pair', '--count', '2', '--failover', '--orphan-exit-ms', String(BOUND), '--log-file', path.join(dir2, 'pair.log')]);
  for (const w of [a, b, c, pair]) t.teardown(() => { try { process.kill(w.pid, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await workers(dir)) === 2 && (await workers(dir3)) === 3 && (await workers(dir2)) === 2, 30_000, 50), 'all joined');
  for (const w of [a, b, c, pair]) w.orphan();
  killGroup(hub);
  killGroup(hub2);
  killGroup(hub3);
  t.ok(await until(() => !alive(pair.pid), 30_000, 100), 'agents of one process alone: it exits');
  t.match(fs.readFileSync(path.join(dir2, 'pair.log'), 'utf8'), /orphaned worker exiting/, 'saying why');
  t.ok(await until(() => !alive(a.pid) && !alive(b.pid), 40_000, 100), 'two orphaned failover processes that see each other: both exit');
  // The first to go still saw the other (the second may have seen it leave first).
  const said = ['peer-a.log', 'peer-b.log'].map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));
  t.ok(said.every((l) => /orphaned worker exiting: its parent process is gone/.test(l)), 'both say why');
  t.ok(said.some((l) => /every failover peer it saw in another process was orphaned too/.test(l)), 'one saw its peer orphaned too');
  // As long again as the orphaned pair took, and the bound three times more.
  await sleep(3 * BOUND);
  t.ok(alive(kept.child.pid!), 'parent alive: still running');
  t.ok(alive(plain.child.pid!), 'parent alive, no failover: still reconnecting');
  t.ok(alive(c.pid), 'an orphan whose peer has a live parent: still running');
  for (const f of ['kept.log', 'peer-c.log']) t.notMatch(fs.readFileSync(path.join(dir3, f), 'utf8'), /orphaned worker exiting/, `${f}: no exit`);
});
