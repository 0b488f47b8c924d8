import { SwarmError } from '../protocol/errors.js';
import { isSameProcess } from '../hub/proc-id.js';
import { readHubFile, type HubFile } from './state.js';

/**
 * True if the hub a hub.json names is alive and is that hub: same pid and start time. An older
 * hub.json without a start time names no hub of ours (its pid may be anyone's by now).
 */
export function hubIsOurs(h: HubFile, _dir?: string): boolean {
  return h.proc_start !== undefined && isSameProcess({ pid: h.pid, start: h.proc_start });
}

/** The running hub of this state directory, or a SWARM_ERR_NO_SWARM error. */
export function runningHub(dir: string): HubFile {
  const h = readHubFile(dir);
  if (!h || !hubIsOurs(h, dir)) throw new SwarmError('SWARM_ERR_NO_SWARM', `no running swarm in ${dir} (start one with \`swarm up\`)`);
  return h;
}
