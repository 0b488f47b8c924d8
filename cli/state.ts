// Loads no part of the hub: every command, the worker too, imports this (cli/running.ts checks a hub is alive).
import fs from 'node:fs';
import path from 'node:path';
import { randomId } from '../protocol/ids.js';
import { SwarmError } from '../protocol/errors.js';
import { writeFileAtomic } from '../protocol/atomic-file.js';
import { MAX_TOKEN } from '../protocol/bounds.js';
import { readBounded } from '../protocol/read-bounded.js';

/** What a running hub writes to `<state-dir>/hub.json` so the CLI and workers can find it. */
export interface HubFile {
  pid: number;
  host: string;
  port: number;
  /** The control API; `tls` when it serves HTTPS (off loopback), verified against `ca_file`. */
  control: { host: string; port: number; tls?: boolean; ca_file?: string };
  token?: string;
  tls?: boolean;
  /** SHA-256 fingerprint of the hub's certificate: local workers pin it (no CA needed on one machine). */
  tls_fingerprint?: string;
  /** The hub process's start time (/proc/PID/stat): with `pid`, tells it from a later process given the same pid. */
  proc_start?: string;
  /** The pid namespace `pid` is one of (a hub in a container is PID 1 there and another pid on the host). */
  pidns?: string;
  started_at: number;
  version: string;
  agents?: number;
}

/** The state directory: `--state-dir`, else SWARM_STATE_DIR, else ./.swarm. */
export function stateDir(opt?: string): string {
  const dir = path.resolve(opt ?? process.env.SWARM_STATE_DIR ?? '.swarm');
  // A file where the directory goes: `up` failed as a bug (EEXIST at mkdir) and `down` called the
  // lock id inside it damaged and said to remove that.
  let st: fs.Stats | undefined;
  try { st = fs.statSync(dir); } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOTDIR') throw new SwarmError('SWARM_ERR_CONFIG', `the state directory ${dir} cannot be: a part of its path is a file, not a directory`);
  }
  if (st && !st.isDirectory()) throw new SwarmError('SWARM_ERR_CONFIG', `the state directory ${dir} is a file, not a directory: give --state-dir (or SWARM_STATE_DIR) a directory`);
  return dir;
}

export function hubFilePath(dir: string): string { return path.join(dir, 'hub.json'); }

export function readHubFile(dir: string): HubFile | undefined {
  let text: string;
  try { text = fs.readFileSync(hubFilePath(dir), 'utf8'); } catch (e) {
    // Not there is no hub; unreadable says nothing of one: another user's swarm may run there, and
    // "no swarm was running" (exit 0 from down) would be a wrong answer.
    if (accessDenied(e)) throw stateAccess(hubFilePath(dir), e);
    return undefined;
  }
  let v: unknown;
  try { v = JSON.parse(text); } catch { return undefined; }
  // Read as damaged (no hub.json) unless it has what readers use: a pid, and where to reach the hub.
  return isHubFile(v) ? v : undefined;
}

function isHubFile(v: unknown): v is HubFile {
  const h = v as Partial<HubFile> | null;
  const port = (p: unknown): boolean => Number.isInteger(p) && (p as number) >= 0 && (p as number) < 65536;
  return typeof h === 'object' && h !== null && Number.isSafeInteger(h.pid) && h.pid! > 0 && typeof h.host === 'string' && port(h.port)
    && typeof h.control === 'object' && h.control !== null && typeof h.control.host === 'string' && port(h.control.port)
    && (h.proc_start === undefined || typeof h.proc_start === 'string') && (h.pidns === undefined || typeof h.pidns === 'string')
    && (h.token === undefined || typeof h.token === 'string');
}

/** Whether a file operation failed for want of permission (another user's file, a read-only mount where `rofs`). */
export function accessDenied(e: unknown, rofs = false): boolean {
  const code = (e as NodeJS.ErrnoException)?.code;
  return code === 'EACCES' || code === 'EPERM' || (rofs && code === 'EROFS');
}

/** A state file this user may not read (or write): SWARM_ERR_STATE_ACCESS naming it and its owner. */
export function stateAccess(file: string, err: unknown, verb: 'read' | 'write' = 'read'): SwarmError {
  let owner = '';
  for (let p = file; p !== path.dirname(p); p = path.dirname(p)) {
    try { owner = ` (${p} belongs to uid ${fs.statSync(p).uid})`; break; } catch { /* climb */ }
  }
  return new SwarmError('SWARM_ERR_STATE_ACCESS', `cannot ${verb} ${file}: ${(err as Error).message.replace(/^[A-Z]+: /, '')}${owner}`);
}

/** What a swarm writes in its state directory: each that exists must be this user's to use. */
const STATE_ENTRIES = ['hub.json', 'token', 'lock-id', 'journal.ndjson', 'journal.old.ndjson', 'journal.quarantine.ndjson', 'snapshot.ndjson', 'snapshot.idx', 'logs', 'pids', 'results', 'failover', 'starting'];

/**
 * Refuse a state directory whose files this user may not write (another user's swarm, or one run as
 * root once): before anything is written, so a refused `swarm up` replaces no token of theirs and
 * fails as SWARM_ERR_STATE_ACCESS naming the file and its owner, not later as an internal EACCES.
 */
export function checkStateWritable(dir: string): void {
  for (const name of ['', ...STATE_ENTRIES]) {
    const p = path.join(dir, name);
    let st: fs.Stats;
    try { st = fs.statSync(p); } catch { continue; }
    try { fs.accessSync(p, st.isDirectory() ? fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK : fs.constants.R_OK | fs.constants.W_OK); } catch (e) {
      throw stateAccess(p, e, 'write');
    }
  }
}

/** Written atomically, readable by this user only (it may hold the token). */
export function writeHubFile(dir: string, hub: HubFile): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileAtomic(hubFilePath(dir), JSON.stringify(hub, null, 2));
}

export function removeHubFile(dir: string, pid: number): void {
  const cur = readHubFile(dir);
  if (cur?.pid === pid) fs.rmSync(hubFilePath(dir), { force: true });
}

/** Pid files under `<state-dir>/pids` (read them with hub/proc-id.ts: they say which process is ours). */
export function pidFiles(dir: string): { id: string; file: string }[] {
  const d = path.join(dir, 'pids');
  let names: string[] = [];
  try { names = fs.readdirSync(d); } catch { return []; }
  return names.filter((n) => n.endsWith('.pid')).map((n) => ({ id: n.slice(0, -4), file: path.join(d, n) }));
}

export const VERSION = '0.1.0';

/** A token for a new swarm: the hub and its workers share it through hub.json and the environment. */
export function newToken(): string { return randomId() + randomId(); }

export function tokenPath(dir: string): string { return path.join(dir, 'token'); }

/**
 * A token file is read up to this many bytes: a path to the wrong file (a model, /dev/zero) was read
 * whole. Far past any token, so that a long one is told its length (checkToken) rather than "too large".
 */
const TOKEN_FILE_MAX = 1024 * 1024;

/**
 * The swarm's token for a hub on this state directory: the one given (--token, SWARM_TOKEN), else
 * the one stored in `<dir>/token`, else the one of a hub that died here (its hub.json), else a new
 * one, stored 0600. Workers that outlive their hub hold this token: a restarted hub must keep it.
 */
export function swarmToken(dir: string, given?: string): string {
  if (given) return checkToken(given, 'the token given (--token, SWARM_TOKEN)');
  let stored = '';
  try { stored = readBounded(tokenPath(dir), TOKEN_FILE_MAX).trim(); } catch (err) {
    // Only a missing file means "none yet": a folder or an unreadable file in its place was replaced
    // by a new token (or failed as a bug at the rename), and workers holding the old one were refused.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new SwarmError('SWARM_ERR_STATE_ACCESS', `the token file ${tokenPath(dir)} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): make it a file holding the token, or remove it to have a new one made`);
    }
  }
  if (stored) return checkToken(stored, `the token in ${tokenPath(dir)}`);
  const old = readHubFile(dir)?.token;
  const token = old ? checkToken(old, `the token in ${path.join(dir, 'hub.json')}`) : newToken();
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileAtomic(tokenPath(dir), token + '\n');
  return token;
}

/**
 * A token travels in an HTTP header (`Authorization: Bearer …`), which takes visible ASCII only: a
 * swarm started with `pässwort-…` or a damaged token file ran, and then every submit, status and
 * down was refused or failed as a bug. So did a 20 KB one (past Node's header limit: the hub answered
 * every request 431), and a 130 KB one failed `swarm up` as a bug (E2BIG at spawn). Throws
 * SWARM_ERR_CONFIG naming where the token came from.
 */
export function checkToken(token: string, from: string): string {
  if (token.length > MAX_TOKEN) {
    throw new SwarmError('SWARM_ERR_CONFIG', `${from} is ${token.length} characters long; a token has at most ${MAX_TOKEN} (it travels in an HTTP header and in every worker's HANDSHAKE), e.g. \`openssl rand -hex 24\``);
  }
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new SwarmError('SWARM_ERR_CONFIG', `${from} has characters an HTTP header cannot carry: use visible ASCII only (letters, digits, punctuation; no spaces, control or non-ASCII characters), e.g. \`openssl rand -hex 24\``);
  }
  return token;
}

/**
 * The token the environment gives: SWARM_TOKEN, else the file SWARM_TOKEN_FILE names (a mounted
 * Secret: a deployment keeps the token out of the environment, the YAML and every command line).
 */
export function envToken(): string | undefined {
  if (process.env.SWARM_TOKEN) return process.env.SWARM_TOKEN;
  const file = process.env.SWARM_TOKEN_FILE;
  if (!file) return undefined;
  let text: string;
  try { text = readBounded(file, TOKEN_FILE_MAX).trim(); } catch (err) { throw new SwarmError('SWARM_ERR_CONFIG', `SWARM_TOKEN_FILE ${file}: ${(err as Error).message}`); }
  if (!text) throw new SwarmError('SWARM_ERR_CONFIG', `SWARM_TOKEN_FILE ${file} is empty`);
  return text;
}

/** A log file of the state directory. */
export const logPath = (dir: string, name: string): string => path.join(dir, 'logs', `${name}.log`);
