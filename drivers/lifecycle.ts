/**
 * Process lifecycle for everything that starts processes (engine drivers, the hub's supervisor):
 * signal a whole process group, stop with SIGTERM then SIGKILL after a grace period, kill every
 * tracked group at exit, and the orphan watchdog that takes an engine down with its parent. No
 * imports beyond Node: the hub takes this file without the driver registry.
 */

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
 * The orphan watchdog, a shell wrapper: it forks a watcher that holds a pipe from us on fd 3, then
 * execs the program (which keeps the spawned pid and leads its group). When our process dies, even by
 * SIGKILL, the pipe closes; the watcher wakes and kills the program (SIGTERM, then SIGKILL on the
 * whole group after 3 s). Linux has no portable parent-death signal from Node, so an EOF on a pipe is
 * the one signal that needs the parent's cooperation neither in life nor death. Spawn it as
 * `spawn('/bin/sh', ['-c', ORPHAN_WATCHDOG, name, file, ...args], { detached: true, stdio: [.., .., .., 'pipe'] })`.
 */
export const ORPHAN_WATCHDOG = [
  '( trap "" TERM INT HUP; read -r _ <&3; kill -TERM $$ 2>/dev/null || exit 0; i=0;' +
    ' while kill -0 $$ 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL -$$ 2>/dev/null ) &',
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
