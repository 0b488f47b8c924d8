import type { Logger } from 'pino';

/**
 * Node as PID 1 (a container started without an init) reaps only the children it started itself:
 * whatever an engine or an exec command orphans is reparented to it and stays a zombie, a pid each,
 * for as long as the container runs. Said once at start, with the fix.
 */
export function warnIfPid1(log: Pick<Logger, 'warn'>): void {
  if (process.pid !== 1) return;
  log.warn({ pid: 1 }, 'running as PID 1 without an init: processes that engines or commands orphan are never reaped and pile up as zombies; run the container with --init (podman, docker), or shareProcessNamespace: true in its pod (the renders set it)');
}
