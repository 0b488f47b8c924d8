import fs from 'node:fs';
import { SwarmError } from './errors.js';

/** A write failed for want of space (a full disk, a quota): said as such, naming the file. */
export function diskFull(file: string, err: unknown): SwarmError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return undefined;
  return new SwarmError('SWARM_ERR_DISK_FULL', `no space left to write ${file} (${code}): the disk of the state directory is full`, { cause: err });
}

/**
 * Write `file` whole or not at all (a temporary file, then rename). A failed write removes its
 * temporary file: on a full disk each try left an empty `*.tmp` behind. No space is SWARM_ERR_DISK_FULL
 * naming the file (Node's own message names only the call: "ENOSPC: …, write").
 */
export function writeFileAtomic(file: string, data: string, mode = 0o600): void {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, data, { mode });
    fs.renameSync(tmp, file);
  } catch (err) {
    try { fs.rmSync(tmp, { force: true }); } catch { /* the error below says what went wrong */ }
    throw diskFull(file, err) ?? err;
  }
}
