import { SwarmError } from '../protocol/index.js';
import { alive } from '../hub/index.js';
import { readHubFile, type HubFile } from './state.js';

/** The running hub of this state directory, or a SWARM_ERR_NO_SWARM error. */
export function runningHub(dir: string): HubFile {
  const h = readHubFile(dir);
  if (!h || !alive(h.pid)) throw new SwarmError('SWARM_ERR_NO_SWARM', `no running swarm in ${dir} (start one with \`swarm up\`)`);
  return h;
}
