import { SwarmError } from '../protocol/errors.js';
import { isSameProcess } from '../hub/proc-id.js';
import { readHubFile, type HubFile } from './state.js';

/**
 * True if the hub a hub.json names is alive and is that hub: same pid and start time (an older
 * hub.json without a start time: a process whose command line names the state directory or the CLI).
 */
export function hubIsOurs(h: HubFile, dir: string): boolean {
  if (h.proc_start !== undefined) return isSameProcess({ pid: h.pid, start: h.proc_start });
  return isSameProcess({ pid: h.pid }, dir) || isSameProcess({ pid: h.pid }, 'cli/main.js');
}

/** The running hub of this state directory, or a SWARM_ERR_NO_SWARM error. */
export function runningHub(dir: string): HubFile {
  const h = readHubFile(dir);
  if (!h || !hubIsOurs(h, dir)) throw new SwarmError('SWARM_ERR_NO_SWARM', `no running swarm in ${dir} (start one with \`swarm up\`)`);
  return h;
}
