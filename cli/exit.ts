import { SwarmError } from '../protocol/errors.js';

/** Documented exit codes of the `swarm` command. */
export const Exit = {
  OK: 0,
  ERROR: 1,
  USAGE: 2,
  NO_SWARM: 3,
  TASKS_FAILED: 4,
  TIMEOUT: 5,
  ALREADY_RUNNING: 6,
  /** Refused: a wrong token, or a certificate the other side does not accept. */
  AUTH: 7,
  INTERRUPTED: 130,
} as const;

const byCode: Partial<Record<SwarmError['code'], number>> = {
  SWARM_ERR_NO_SWARM: Exit.NO_SWARM,
  SWARM_ERR_CONFIG: Exit.USAGE,
  SWARM_ERR_INSECURE_BIND: Exit.USAGE,
  SWARM_ERR_UNKNOWN_RUN: Exit.USAGE, // a run id on the command line that names no run
  SWARM_ERR_TIMEOUT: Exit.TIMEOUT,
  SWARM_ERR_ALREADY_RUNNING: Exit.ALREADY_RUNNING,
  SWARM_ERR_AUTH: Exit.AUTH,
};

/** Print an error as `swarm: CODE: message` (or JSON) and exit with its documented code. */
export function fail(err: unknown, json = false): never {
  const code = err instanceof SwarmError ? err.code : 'SWARM_ERR_INTERNAL';
  const msg = err instanceof Error ? err.message : String(err);
  if (json) process.stdout.write(JSON.stringify({ error: { code, msg } }) + '\n');
  else process.stderr.write(`swarm: ${code}: ${msg}\n`);
  process.exit(err instanceof SwarmError ? (byCode[err.code] ?? Exit.ERROR) : Exit.ERROR);
}
