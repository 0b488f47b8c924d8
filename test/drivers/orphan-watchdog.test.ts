import fs from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import t from 'tap';
import { ALIVE_FN, ORPHAN_WATCHDOG } from '../../drivers/lifecycle.js';
import { alive } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/**
 * The orphan watchdog (drivers/lifecycle.ts) takes a program's process group down when our process
 * dies. Its wait for the program to end must see a zombie (exited, never reaped: its parent is gone
 * too, or does not wait) as dead; `kill -0` alone succeeds on one, and the rest of the group lived
 * on for the watchdog's full grace time.
 */
const stateOf = (pid: number): string | undefined => {
  try { const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8'); return s[s.lastIndexOf(')') + 2]; } catch { return undefined; }
};
const commOf = (pid: number): string | undefined => {
  try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return undefined; }
};
const aliveSays = (pid: number) => execFileSync('/bin/sh', ['-c', `${ALIVE_FN}\nalive ${pid} && echo alive || echo dead`], { encoding: 'utf8' }).trim();

/** Lines `name pid` from a child's stdout, by name. */
function pidsFrom(child: ReturnType<typeof spawn>, names: string[]): Promise<Record<string, number>> {
  return new Promise((resolve) => {
    const got: Record<string, number> = {};
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => {
      buf += c.toString();
      for (const m of buf.matchAll(/^(\w+) (\d+)$/gm)) got[m[1]!] = Number(m[2]);
      if (names.every((n) => got[n])) resolve(got);
    });
  });
}

t.test('alive: a running process is alive; a zombie and a gone pid are dead', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  // The child exits once its parent has exec'd into `sleep 30`, which never reaps it. Not before: a
  // child that ends while the shell still runs is reaped by the shell (dash waits on SIGCHLD), and
  // under load `sleep 0 &` did end first: no zombie ever appeared. Bounded: 3000 looks, 30 s at least.
  const child = `i=0; while [ $i -lt 3000 ] && read c < /proc/$p/comm && [ "$c" != sleep ]; do i=$((i+1)); sleep 0.01; done`;
  const parent = spawn('/bin/sh', ['-c', `p=$$; (${child}) & echo "zombie $!"; exec sleep 30`], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => { parent.kill('SIGKILL'); });
  const { zombie } = await pidsFrom(parent, ['zombie']);
  t.ok(await until(() => stateOf(zombie!) === 'Z', 10_000, 20), 'the child is a zombie');
  t.equal(aliveSays(zombie!), 'dead', 'a zombie is dead');
  t.equal(aliveSays(parent.pid!), 'alive', 'a running process is alive');
  t.equal(aliveSays(2 ** 22 + 1), 'dead', 'a pid that does not exist is dead');
});

t.test('when the program exits as a zombie, the watchdog kills the rest of its group', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  // The parent (our stand-in, which exits with us) starts the wrapped program with our pipe on fd 3,
  // then becomes a process that never reaps it. The program leads its own group (setsid), leaves a
  // child in it, and exits on SIGTERM: a zombie.
  const program = `sleep 1000 & echo "grandchild $!"; trap "exit 0" TERM; while :; do sleep 0.05; done`;
  const parent = spawn('/bin/sh', ['-c', `setsid /bin/sh -c "$1" swarm-test /bin/sh -c '${program}' & echo "program $!"; exec sleep 30`, 'parent', ORPHAN_WATCHDOG],
    { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] });
  const pids = await pidsFrom(parent, ['program', 'grandchild']);
  t.teardown(() => { parent.kill('SIGKILL'); try { process.kill(pids.grandchild!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(alive(pids.program!) && alive(pids.grandchild!), 'the program and its child run');
  // The parent shell reaps a child that ends before it has exec'd into `sleep 30` (see above).
  t.ok(await until(() => commOf(parent.pid!) === 'sleep', 10_000, 20), 'the parent no longer reaps its children');
  // Our side of the pipe closes, as when we die.
  const at = Date.now();
  (parent.stdio[3] as NodeJS.WritableStream).end();
  t.ok(await until(() => !alive(pids.grandchild!), 10_000, 20), 'the program\'s child is killed');
  t.comment(`the group was killed ${Date.now() - at} ms after the pipe closed (the grace time is 3 s)`);
  t.equal(stateOf(pids.program!), 'Z', 'while the program was still an unreaped zombie');
});
