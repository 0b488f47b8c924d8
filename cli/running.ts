import { SwarmError } from '../protocol/errors.js';
import { inThisNamespace, localProcess } from '../hub/proc-id.js';
import { readHubFile, type HubFile } from './state.js';

/**
 * The hub a hub.json names, as this pid namespace numbers it, if it is alive and is that hub: same
 * pid (looked up by its namespace when it was written in another, a hub in a container read on the
 * host) and start time. An older hub.json without a start time names no hub of ours.
 */
export function hubPid(h: HubFile): number | undefined {
  if (h.proc_start === undefined) return undefined;
  return localProcess({ pid: h.pid, start: h.proc_start, pidns: h.pidns })?.pid;
}

/** True if the hub a hub.json names is alive and is that hub (hubPid). */
export function hubIsOurs(h: HubFile, _dir?: string): boolean { return hubPid(h) !== undefined; }

/**
 * A hub.json written in a pid namespace whose processes this one cannot see (the host's, read in a
 * container, or a sibling container's): its pid says nothing here, so its hub is judged by its
 * answer (`hubAnswers`), never by a process of this namespace that has that pid.
 */
export function hubUnseen(h: HubFile): boolean {
  return h.proc_start !== undefined && !inThisNamespace({ pid: h.pid, pidns: h.pidns }) && hubPid(h) === undefined;
}

/**
 * Whether the hub of a hub.json answers at its control address, with its token, as itself (the pid
 * it reports is the file's: a later hub on that port would be another). What judges an unseen hub.
 */
export async function hubAnswers(h: HubFile, timeoutMs = 2000): Promise<boolean> {
  const { call } = await import('./http.js');
  try {
    const s = await call<{ hub?: { pid?: number } }>(h, 'GET', '/status', undefined, timeoutMs);
    return s.hub?.pid === h.pid;
  } catch { return false; }
}

/**
 * The running hub of this state directory, or a SWARM_ERR_NO_SWARM error. An unseen hub (hubUnseen)
 * is returned: the call made to it says whether it runs (one that does not answers nothing, NO_SWARM).
 */
export function runningHub(dir: string): HubFile {
  const h = readHubFile(dir);
  if (!h || !(hubIsOurs(h, dir) || hubUnseen(h))) throw new SwarmError('SWARM_ERR_NO_SWARM', `no running swarm in ${dir} (start one with \`swarm up\`)`);
  return h;
}
