import { SwarmError, type ErrorCode } from '../protocol/errors.js';

/** Documented exit codes of the `swarm` command (README, `swarm --help`). */
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

/** The exit codes as `swarm --help` lists them. */
export const EXIT_HELP = 'Exit codes: 0 ok, 1 error, 2 usage or configuration, 3 no running swarm, 4 tasks failed, 5 timeout,\n'
  + '6 already running, 7 refused (token or TLS certificate), 130 interrupted (Ctrl-C).';

const byCode: Partial<Record<ErrorCode, number>> = {
  SWARM_ERR_NO_SWARM: Exit.NO_SWARM,
  SWARM_ERR_CONFIG: Exit.USAGE,
  SWARM_ERR_INSECURE_BIND: Exit.USAGE,
  SWARM_ERR_UNKNOWN_RUN: Exit.USAGE, // a run id on the command line that names no run
  SWARM_ERR_TIMEOUT: Exit.TIMEOUT,
  SWARM_ERR_ALREADY_RUNNING: Exit.ALREADY_RUNNING,
  SWARM_ERR_AUTH: Exit.AUTH,
  SWARM_ERR_STATE_ACCESS: Exit.USAGE,
};

/** The command the user ran (`swarm deploy render` -> "deploy render"), for hints. */
function commandName(argv = process.argv): string {
  const words: string[] = [];
  for (const a of argv.slice(2)) { if (a.startsWith('-') || words.length === 2) break; words.push(a); }
  return words.length ? `swarm ${words.join(' ')}` : 'swarm';
}

/** One line that says what to do next, by code. */
export function hintFor(code: ErrorCode, cmd = commandName()): string {
  switch (code) {
    case 'SWARM_ERR_CONFIG': return `\`${cmd} --help\` lists the options and their values`;
    case 'SWARM_ERR_NO_SWARM': return 'start one with `swarm up --detach`, or name it with --state-dir or --hub-url';
    case 'SWARM_ERR_ALREADY_RUNNING': return 'use it (`swarm status`), stop it (`swarm down`), or give another --state-dir';
    case 'SWARM_ERR_AUTH': return 'check the token (--token, SWARM_TOKEN, <state-dir>/token) and the CA (--tls-ca)';
    case 'SWARM_ERR_TIMEOUT': return 'the swarm may still be working: look with `swarm status`, or allow more time';
    case 'SWARM_ERR_UNKNOWN_RUN': return '`swarm runs ls` lists the runs';
    case 'SWARM_ERR_INSECURE_BIND': return 'give a --token (or SWARM_TOKEN) of at least 16 characters to listen off loopback';
    case 'SWARM_ERR_ENGINE_NOT_FOUND': return 'build the llama.cpp programs once with `swarm engine build`';
    case 'SWARM_ERR_ENGINE_START': case 'SWARM_ERR_ENGINE_DIED': return 'the logs in <state-dir>/logs say why the engine did not run';
    case 'SWARM_ERR_DISK_FULL': case 'SWARM_ERR_JOURNAL': return 'free space in the state directory, then retry: nothing of the request was kept';
    case 'SWARM_ERR_SHUTDOWN': return 'it was stopped on purpose (swarm down, a signal): `swarm up` starts it again';
    case 'SWARM_ERR_STATE_ACCESS': return 'run as the user who owns the state directory, or give your own --state-dir (or SWARM_STATE_DIR); a hub whose hub.json is gone is stopped by `swarm down`';
    case 'SWARM_ERR_INTERNAL': return 'this is a bug: please report it with the command line and <state-dir>/logs';
    default: return 'protocol/PROTOCOL.md lists every error code';
  }
}

/**
 * Print an error as `swarm: CODE: message` and a hint line on stderr (or one JSON object on stdout
 * with --json), and exit with its documented code.
 */
export function fail(err: unknown, json = false, opts: { exit?: number; hint?: string } = {}): never {
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  // No space for a write no one named: a full disk, not a bug or a permission.
  if (!(err instanceof SwarmError) && (errno === 'ENOSPC' || errno === 'EDQUOT')) {
    err = new SwarmError('SWARM_ERR_DISK_FULL', `no space left on the disk (${(err as Error).message})`, { cause: err });
  }
  const code = err instanceof SwarmError ? err.code : 'SWARM_ERR_INTERNAL';
  const msg = err instanceof Error ? err.message : String(err);
  // A failed system call (a missing file, a refused permission) is the user's to fix, not a bug.
  const hint = opts.hint ?? (!(err instanceof SwarmError) && typeof errno === 'string' && /^E[A-Z]+$/.test(errno)
    ? `a file, folder or address could not be used (${errno}): check the path and its permissions`
    : hintFor(code));
  if (json) process.stdout.write(JSON.stringify({ error: { code, msg, hint } }) + '\n');
  else process.stderr.write(`swarm: ${code}: ${msg}\nhint: ${hint}\n`);
  process.exit(opts.exit ?? (err instanceof SwarmError ? (byCode[err.code] ?? Exit.ERROR) : Exit.ERROR));
}

/** Leave quietly when whoever reads stdout or stderr has gone (`swarm top | head -3`). */
export function quietOnClosedPipe(): void {
  for (const s of [process.stdout, process.stderr]) {
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(Exit.OK);
      throw err;
    });
  }
}
