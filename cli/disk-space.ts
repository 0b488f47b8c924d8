import fs from 'node:fs';
import path from 'node:path';
import { SwarmError } from '../protocol/errors.js';

/** Below this free on the state directory's disk, `swarm up` does not start (journal, logs, pid files). */
export const MIN_FREE_BYTES = 1024 * 1024;

/** Bytes free to this user on the disk `dir` is (or would be made) on; undefined when it cannot be told. */
export function spaceLeft(dir: string): number | undefined {
  // The directory may not exist yet: the disk is that of its nearest existing parent.
  for (let d = path.resolve(dir), i = 0; i < 256; d = path.dirname(d), i++) {
    try { const s = fs.statfsSync(d); return s.bavail * s.bsize; } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || d === path.dirname(d)) return undefined;
    }
  }
  return undefined;
}

/**
 * Refuse to start a swarm whose state directory's disk is (nearly) full: it got as far as its token,
 * its lock and a worker process before a write failed, and the hub then died with nothing logged (its
 * log is on that disk), or waited out --ready-timeout for workers it could not record.
 */
export function refuseFullDisk(dir: string): void {
  const free = spaceLeft(dir);
  if (free !== undefined && free < MIN_FREE_BYTES) throw fullDisk(dir, free, 'a swarm needs at least 1 MiB there for its journal, logs and pid files');
}

/** SWARM_ERR_DISK_FULL for the state directory `dir`, with what was going on. */
export function fullDisk(dir: string, free: number, what: string): SwarmError {
  return new SwarmError('SWARM_ERR_DISK_FULL', `the disk of ${dir} is full (${free} bytes free): ${what}; free space, then \`swarm up\` again`);
}
