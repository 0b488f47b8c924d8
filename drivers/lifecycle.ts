/**
 * Engine process groups this process started, so that one call at exit kills them all even if a
 * driver never got to stop() (the fd-3 watchdog covers a SIGKILL of this process).
 */
const groups = new Set<number>();

/** Remember an engine's process group (its pid, as it leads the group). */
export function trackChild(pid: number): void { groups.add(pid); }
export function untrackChild(pid: number): void { groups.delete(pid); }

/** SIGKILL every tracked engine process group. Synchronous: safe in an 'exit' handler. */
export function killAllChildren(): void {
  for (const pid of groups) {
    try { process.kill(-pid, 'SIGKILL'); } catch { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
  }
  groups.clear();
}
