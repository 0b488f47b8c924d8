import fs from 'node:fs';

/** Worker links the hub accepts by default (each an fd, for as long as the link lasts). */
export const DEFAULT_MAX_WORKER_LINKS = 20_000;
/**
 * Control API connections by default: the /wait and `submit --wait` places (hub/wait.ts, 1,024)
 * plus 256 for dashboards, `swarm status` and submits held on keep-alive.
 */
export const DEFAULT_MAX_CONTROL_CONNECTIONS = 1024 + 256;
/**
 * Fds kept out of the two caps: the journal's segments and snapshot, the archive's files, the logs,
 * the listeners, and three pipes per supervised process. 256 covers a hub that supervises ~60
 * processes; 10% grows with a host set up for more (a 65,536 limit keeps 6,554).
 */
export const MIN_RESERVE_FDS = 256;
export const RESERVE_SHARE = 0.1;

export interface ConnCaps {
  workers: number;
  control: number;
  /** The process's open-files limit they were fitted under (undefined: not known, caps as configured). */
  fdLimit?: number;
  reserve: number;
  /** The configured caps, when they did not fit and were lowered. */
  lowered?: { workers: number; control: number };
}

/** The soft limit of open files of this process (RLIMIT_NOFILE), or undefined off Linux or when unlimited. */
export function openFilesLimit(limits = '/proc/self/limits'): number | undefined {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync(limits, 'utf8'));
    return m && m[1] !== 'unlimited' ? Number(m[1]) : undefined;
  } catch { return undefined; }
}

/**
 * The worker port's and control port's connection caps, fitted so that both full still leave the
 * reserve free under the fd limit: past it the hub could not open its journal, archive or log
 * (EMFILE), nor accept its own workers. Caps that do not fit are lowered: the control API keeps its
 * configured cap up to a quarter of the room (its default is sized for the /wait places; a share in
 * proportion left it 46 of them under ulimit -n 1024), the worker port takes the rest; each at least 1.
 */
export function fitConnCaps(want: { workers: number; control: number }, fdLimit: number | undefined): ConnCaps {
  if (fdLimit === undefined) return { ...want, reserve: 0 };
  const reserve = Math.max(MIN_RESERVE_FDS, Math.ceil(fdLimit * RESERVE_SHARE));
  const room = Math.max(2, fdLimit - reserve);
  if (want.workers + want.control <= room) return { ...want, fdLimit, reserve };
  const control = Math.max(1, Math.min(want.control, Math.max(Math.floor(room / 4), room - want.workers)));
  const workers = Math.max(1, Math.min(want.workers, room - control));
  return { workers, control, fdLimit, reserve, lowered: { ...want } };
}
