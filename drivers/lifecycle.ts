/**
 * Process lifecycle for everything that starts processes (engine drivers, the hub's supervisor, the
 * CLI's detached hub and workers): the one place that spawns (startProcess; one-shot commands go
 * through run-command.ts on top of it), signal a whole process group, stop with SIGTERM then SIGKILL
 * after a grace period, kill every tracked group at exit, and the orphan watchdog that takes an
 * engine down with its parent. No imports beyond Node (and protocol/proc-stat.ts, which has none): the hub takes this file without the driver registry.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { statFields } from '../protocol/proc-stat.js';

/** How startProcess starts a program. */
export interface StartOptions {
  cwd?: string;
  /** The whole environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  stdio?: StdioOptions;
  /**
   * Lead a process group of its own (default true): killGroup then takes its children too, and a
   * terminal's Ctrl-C does not reach it. false keeps it in ours (a foreground child).
   */
  group?: boolean;
  /** Wrap it in ORPHAN_WATCHDOG: it dies with this process even on SIGKILL. Needs fd 3 free in stdio. */
  watchdog?: string;
}

/**
 * Start a program: every production spawn goes through here, so that process groups, the orphan
 * watchdog and the exit-time kill are decided in one file. Throws what spawn throws (E2BIG);
 * a missing program arrives as the child's 'error' event, as with spawn.
 */
export function startProcess(file: string, args: readonly string[], o: StartOptions = {}): ChildProcess {
  const [f, a] = o.watchdog === undefined ? [file, args] : ['/bin/sh', ['-c', ORPHAN_WATCHDOG, o.watchdog, file, ...args]];
  return spawn(f, a, { cwd: o.cwd, env: o.env ?? process.env, stdio: o.stdio ?? 'ignore', detached: o.group ?? true });
}

/** True if a process with this pid exists (and is not a zombie we could reap). */
export function alive(pid: number): boolean {
  try { process.kill(pid, 0); } catch (e) { return (e as NodeJS.ErrnoException).code === 'EPERM'; }
  // Unreadable /proc (another mount, hidepid) with kill(0) succeeding: alive.
  const f = statFields(pid);
  return f ? f[0] !== 'Z' : true;
}

/** Signal a whole process group (a leader and its children), falling back to the pid alone. */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try { process.kill(-pid, signal); } catch { try { process.kill(pid, signal); } catch { /* gone */ } }
}

/**
 * SIGTERM, then SIGKILL after `graceMs` unless `exited` settled first; resolves with how it ended.
 * The event loop is held meanwhile (a child's handles are often unref'd).
 */
export async function stopGracefully<T>(signal: (sig: NodeJS.Signals) => void, exited: Promise<T>, graceMs: number): Promise<T> {
  signal('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const forced = new Promise<void>((r) => { timer = setTimeout(() => { signal('SIGKILL'); r(); }, graceMs); });
  try { return await keepLoopAlive(Promise.race([exited, forced.then(() => exited)])); } finally { clearTimeout(timer); }
}

/**
 * Keep this process's event loop alive until `p` settles. An engine's process handle and pipes are
 * unref'd (an idle engine must never hold a worker open), so code that awaits only the engine (its
 * exit, its first /health answer) would otherwise let the loop drain and the process end mid-await.
 */
export function keepLoopAlive<T>(p: Promise<T>): Promise<T> {
  const timer = setInterval(() => {}, 1 << 30);
  return p.finally(() => clearInterval(timer));
}

/**
 * A shell function `alive PID`: true while PID exists and has not exited. `kill -0` also succeeds on
 * a zombie (exited, not yet reaped: its parent died too, or does not wait), and the watchdog below
 * then waited its full 3 s before killing the rest of the group; so the state letter of
 * /proc/PID/stat (after the last ')', since the command name may hold one) is read too, where
 * there is one (Linux), and 'Z' or 'X' is dead.
 */
export const ALIVE_FN = 'alive() { kill -0 "$1" 2>/dev/null || return 1; s=; read -r s 2>/dev/null < "/proc/$1/stat" || return 0; s=${s##*") "}; case "${s%% *}" in Z|X) return 1;; esac; return 0; }';

/**
 * The orphan watchdog, a shell wrapper: it forks a watcher that holds a pipe from us on fd 3, then
 * execs the program (which keeps the spawned pid and leads its group). When our process dies, even by
 * SIGKILL, the pipe closes; the watcher wakes and kills the program (SIGTERM, then SIGKILL on the
 * whole group after 3 s). Linux has no portable parent-death signal from Node, so an EOF on a pipe is
 * the one signal that needs the parent's cooperation neither in life nor death. Start it with
 * `startProcess(file, args, { watchdog: name, stdio: [.., .., .., 'pipe'] })`.
 */
export const ORPHAN_WATCHDOG = [
  ALIVE_FN,
  '( trap "" TERM INT HUP; read -r _ <&3; kill -TERM $$ 2>/dev/null || exit 0; i=0;' +
    ' while alive $$ && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL -$$ 2>/dev/null ) &',
  'exec "$@" 3<&-',
].join('\n');

/**
 * Process groups this process started, so that one call at exit kills them all even if a driver
 * never got to stop() (the watchdog covers a SIGKILL of this process).
 */
const groups = new Set<number>();

/** Remember a child's process group (its pid, as it leads the group). */
export function trackChild(pid: number): void { groups.add(pid); }
export function untrackChild(pid: number): void { groups.delete(pid); }

/** SIGKILL every tracked process group. Synchronous: safe in an 'exit' handler. */
export function killAllChildren(): void {
  for (const pid of groups) killGroup(pid, 'SIGKILL');
  groups.clear();
}
