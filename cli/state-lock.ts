import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { SwarmError } from '../protocol/errors.js';
import { diskFull } from '../protocol/atomic-file.js';
import { accessDenied, stateAccess } from './state.js';

/** A held state-directory lock; `release` gives it up (a process that dies gives it up too). */
export interface StateLock { release(): void }

/**
 * The abstract socket a hub of the directory listens on: its lock id and the directory's own identity
 * (device and inode). A copy of the directory (`cp -a`, a restored backup) carries the same lock-id
 * file: by the id alone, its hub was refused while the original's ran ("another hub is running").
 */
function lockName(id: string, dir: string, kind: 'hub' | 'down' = 'hub'): string {
  let ino = '';
  try { const st = fs.statSync(dir, { bigint: true }); ino = `-${st.dev.toString(36)}-${st.ino.toString(36)}`; } catch { /* gone: the id alone */ }
  return `\0swarm-${kind}-${id}${ino}`;
}

/** What `file` holds, trimmed: undefined if there is none yet; a read that fails otherwise throws. */
function readLockFile(file: string): string | undefined {
  try { return fs.readFileSync(file, 'utf8').trim(); } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

const isLockId = (s: string): boolean => /^[0-9a-f]{32}$/.test(s);

/** The id in `file`: undefined if there is none yet or it is not one; a read that fails otherwise throws. */
function readLockId(file: string): string | undefined {
  const text = readLockFile(file);
  return text !== undefined && isLockId(text) ? text : undefined;
}

/** The directory's lock id if one was made (read only: a probe must not create it). */
function existingLockId(dir: string): string | undefined {
  try { return readLockId(path.join(dir, 'lock-id')); } catch { return undefined; }
}

/**
 * The name of the directory's lock: a random id kept in the directory (owner-only), so another local
 * user, who cannot read it, cannot take the name first and keep the hub from starting. Made once, by
 * link(2): two processes racing on a fresh directory read the same id.
 */
function lockId(dir: string): string {
  const file = path.join(dir, 'lock-id');
  for (let i = 0; i < 50; i++) {
    let text: string | undefined;
    try { text = readLockFile(file); } catch (e) { throw accessDenied(e) ? stateAccess(file, e) : damagedLockId(file, (e as Error).message); }
    if (text !== undefined && isLockId(text)) return text;
    // Made by link(2), whole or not at all: one that is there and holds no id was damaged by someone
    // else. Not replaced here: two hubs that each replaced it would take two locks on one journal.
    // Judged by what the read found, not by whether the file exists now: a process racing on the fresh
    // directory (`swarm down` right after `swarm up`) may have linked it since, whole.
    if (text !== undefined) throw damagedLockId(file, 'it holds no lock id');
    const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
    try {
      fs.writeFileSync(tmp, crypto.randomBytes(16).toString('hex') + '\n', { mode: 0o600 });
      fs.linkSync(tmp, file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw diskFull(file, e) ?? e;
    } finally { fs.rmSync(tmp, { force: true }); }
  }
  throw new SwarmError('SWARM_ERR_INTERNAL', `cannot read ${file}`);
}

function damagedLockId(file: string, why: string): SwarmError {
  return new SwarmError('SWARM_ERR_CONFIG', `${file} is damaged (${why}); if no swarm runs in this directory, remove it (\`rm -r ${file}\`): the next start makes a new one`);
}

/**
 * Take the state directory for this process's hub, or refuse with SWARM_ERR_ALREADY_RUNNING. The check
 * of hub.json alone raced: two `swarm up` started together each found none, and two hubs appended to
 * one journal. The lock is an abstract Unix socket (Linux), which the kernel frees with its process
 * however it ends: no stale lock after a kill -9. Elsewhere there is no lock (undefined).
 */
export async function lockStateDir(dir: string): Promise<StateLock | undefined> {
  if (process.platform !== 'linux') return undefined;
  const lock = await listenOn(lockName(lockId(dir), dir));
  if (!lock) throw new SwarmError('SWARM_ERR_ALREADY_RUNNING', `another hub is starting or running in ${dir}; \`swarm down\` stops it`);
  return lock;
}

/** Listen on an abstract socket: the lock, or undefined if another process holds the name. */
async function listenOn(name: string): Promise<StateLock | undefined> {
  const server = net.createServer((s) => s.destroy());
  try {
    await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(name, () => resolve()); });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') return undefined;
    throw e;
  }
  server.unref();
  return { release: () => { server.close(); } };
}

/** Whether a process listens on an abstract socket. */
function listening(name: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = net.connect(name);
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/**
 * Whether a hub holds the directory's lock (it is starting or running): a hub takes it before it
 * writes hub.json, so `swarm down` sees a hub in that window by this. False where there is no lock.
 */
export async function lockHeld(dir: string): Promise<boolean> {
  if (process.platform !== 'linux') return false;
  const id = existingLockId(dir);
  return id ? listening(lockName(id, dir)) : false;
}

/**
 * The lock a `swarm down` holds while it stops the directory's swarm, so that a second `down` waits
 * for that stop instead of finding a hub half gone ("no swarm was running"), and a `swarm up` does not
 * start beside it. `'held'` when another process has it; undefined where there is no lock (not Linux).
 */
export async function lockStopping(dir: string): Promise<StateLock | 'held' | undefined> {
  if (process.platform !== 'linux') return undefined;
  let id: string;
  try { id = lockId(dir); } catch (e) {
    // No lock id and no room to make one (a full disk): no hub holds this directory (a hub makes the
    // id first) and none can start here, so there is nothing to hold off; `down` goes on without.
    if (e instanceof SwarmError && e.code === 'SWARM_ERR_DISK_FULL' && existingLockId(dir) === undefined) return undefined;
    throw e;
  }
  return await listenOn(lockName(id, dir, 'down')) ?? 'held';
}

/** Whether a `swarm down` is stopping the directory's swarm now (read only: makes no lock id). */
export async function stoppingHeld(dir: string): Promise<boolean> {
  if (process.platform !== 'linux') return false;
  const id = existingLockId(dir);
  return id ? listening(lockName(id, dir, 'down')) : false;
}

/**
 * The pid of the process that holds the directory's lock (Linux: its abstract socket's inode in
 * /proc/net/unix, then the process with that socket open), or undefined. What `swarm down` stops
 * when hub.json is gone or damaged under a running hub: the lock proves which hub is this directory's.
 */
export function lockHolder(dir: string): number | undefined {
  if (process.platform !== 'linux') return undefined;
  const id = existingLockId(dir);
  if (!id) return undefined;
  const want = `@${lockName(id, dir).slice(1)}`;
  let inode: string | undefined;
  try {
    for (const line of fs.readFileSync('/proc/net/unix', 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      // The listening socket (flag __SO_ACCEPTCON), not one it accepted (a probe's, closed since); the
      // name is shown with its padding NULs as '@'.
      if (f.length >= 8 && f[3] === '00010000' && f[7]!.replace(/@+$/, '') === want) { inode = f[6]; break; }
    }
  } catch { return undefined; }
  if (!inode) return undefined;
  const target = `socket:[${inode}]`;
  let root: string;
  try { root = fs.realpathSync(dir) + path.sep; } catch { return undefined; }
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    let links: string[];
    try { links = fs.readdirSync(`/proc/${p}/fd`).map((fd) => { try { return fs.readlinkSync(`/proc/${p}/fd/${fd}`); } catch { return ''; } }); } catch { continue; }
    // And it has a file of this directory open (its journal, its log): proof it is this directory's hub.
    if (links.includes(target)) return links.some((l) => l.startsWith(root)) ? Number(p) : undefined;
  }
  return undefined;
}
