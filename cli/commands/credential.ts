import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { peerSecret, workerCredential } from '../../protocol/auth.js';
import { fail } from '../exit.js';
import { MAX_ID } from '../../protocol/bounds.js';
import { readHubFile, stateDir, tokenPath } from '../state.js';
import fs from 'node:fs';

/**
 * `swarm credential <worker-id>`: the credential a worker on another machine presents instead of
 * the swarm token (it admits that id only); `--peers` the secret failover peers share.
 */
export function registerCredential(program: Command): void {
  program.command('credential')
    .description('print the credential a worker uses to join as <worker-id> only (swarm worker --id <worker-id> --token <credential>)')
    .argument('[worker-id]', 'the worker id the credential admits')
    .option('--peers', 'print the failover peer-link secret instead (swarm worker --peer-token)', false)
    .option('--state-dir <dir>', 'state directory whose token derives it (env SWARM_STATE_DIR)')
    .option('--json', 'print {"id", "credential"} (or {"peer_secret"} with --peers)', false)
    .action((id: string | undefined, o: { peers: boolean; stateDir?: string; json: boolean }) => {
      try {
        const dir = stateDir(o.stateDir);
        const token = process.env.SWARM_TOKEN ?? readToken(dir);
        if (!token) throw new SwarmError('SWARM_ERR_NO_SWARM', `no token in ${dir} (start a hub there first, or set SWARM_TOKEN)`);
        if (o.peers) { process.stdout.write((o.json ? JSON.stringify({ peer_secret: peerSecret(token) }) : peerSecret(token)) + '\n'); return; }
        if (!id) throw new SwarmError('SWARM_ERR_CONFIG', 'name the worker id (or --peers)');
        // A HANDSHAKE's worker_id is 1-128 characters: a credential for a longer id admits nothing.
        if (id.length > MAX_ID) throw new SwarmError('SWARM_ERR_CONFIG', `a worker id has at most ${MAX_ID} characters (this one has ${id.length})`);
        const credential = workerCredential(token, id);
        process.stdout.write((o.json ? JSON.stringify({ id, credential }) : credential) + '\n');
      } catch (err) { fail(err, o.json); }
    });
}

function readToken(dir: string): string | undefined {
  try { return fs.readFileSync(tokenPath(dir), 'utf8').trim() || undefined; } catch { return readHubFile(dir)?.token; }
}
