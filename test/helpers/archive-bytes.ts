import fs from 'node:fs';
import { archiveDir, archiveFiles } from '../../hub/archive.js';

/**
 * Bytes of the results archive's files under the state dir `state`. A running hub prunes files while
 * this reads them: a file listed but gone by its stat holds no bytes.
 */
export function archiveBytes(state: string): number {
  let n = 0;
  for (const [, f] of archiveFiles(archiveDir(state))) {
    try { n += fs.statSync(f).size; } catch (e) { if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e; }
  }
  return n;
}
