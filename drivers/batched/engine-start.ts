import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SwarmError } from '../../protocol/index.js';
import { alive, killGroup, startProcess } from '../lifecycle.js';
import { EngineLoadError } from '../engine-error.js';
import { engineLadder, noteAddonSigill } from '../llama-build/addon-variant.js';
import { DEFAULT_LOOP, LOAD_FAILED_EXIT, type EngineConfig } from './messages.js';
import type { FlashAttnSetting } from './flash-attn.js';
import type { KvUnifiedSetting } from './kv-layout.js';

const HERE = fileURLToPath(import.meta.url);
/** The host script next to this file, with our own extension (.ts under tap's loader, .js in dist). */
const HOST_SCRIPT = path.join(path.dirname(HERE), 'host' + path.extname(HERE));
const hostExecArgv = (): string[] => process.execArgv.filter((a) => !/^--(inspect|debug)/.test(a));

/** The files of one engine: its socket, the lock its starter holds, its pid and its log. */
export interface EnginePaths { socket: string; lock: string; pid: string; log: string; failed: string; info: string }

/**
 * Where the engine for (dir, model, ctx, threads) lives. One engine per model and settings in a
 * directory: every worker of a swarm (same state dir) finds the same one. Unix socket paths are
 * limited to 107 bytes, so a long directory gets its socket under the system's temp dir instead.
 */
export function enginePaths(dir: string | undefined, key: { model: string; ctx: number; threads: number | 'auto'; prefixCache?: boolean; kvUnified?: KvUnifiedSetting; tailWiden?: boolean; flashAttn?: FlashAttnSetting; loop?: 'direct' | 'library' }): EnginePaths {
  let base = dir;
  if (base === undefined) privateDir(base = path.join(os.tmpdir(), `swarm-engines-${process.getuid?.() ?? 'u'}`));
  const id = crypto.createHash('sha256').update(`${path.resolve(key.model)}\0${key.ctx}\0${key.threads}${key.prefixCache === false ? '\0nocache' : ''}${key.kvUnified === false ? '\0nokvu' : key.kvUnified === true ? '\0kvu' : ''}${key.tailWiden === false ? '\0nowiden' : ''}${key.flashAttn && key.flashAttn !== 'auto' ? `\0fa-${key.flashAttn}` : ''}${key.loop && key.loop !== DEFAULT_LOOP ? `\0loop=${key.loop}` : ''}`).digest('hex').slice(0, 12);
  const root = path.join(base, 'engines');
  let socket = path.join(root, `${id}.sock`);
  if (Buffer.byteLength(socket) > 100) {
    const short = path.join(os.tmpdir(), `swarm-eng-${process.getuid?.() ?? 'u'}`);
    privateDir(short);
    socket = path.join(short, crypto.createHash('sha256').update(socket).digest('hex').slice(0, 16) + '.sock');
  }
  return { socket, lock: path.join(root, `${id}.lock`), pid: path.join(root, `${id}.pid`), log: path.join(root, `${id}.log`), failed: path.join(root, `${id}.failed`), info: path.join(root, `${id}.json`) };
}

/**
 * Make `dir` (a folder under the shared temp dir, whose name anyone can guess) or take it as found only
 * if it is ours and no one else may write in it: another local user who made it first could put their
 * own socket there and answer every prompt.
 */
function privateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(dir);
  const uid = process.getuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) {
    throw new SwarmError('SWARM_ERR_CONFIG', `${dir} is not a folder of this user (owner uid ${st.uid}${st.isSymbolicLink() ? ', a symlink' : ''}): the engine's socket will not go there; remove it or use a shorter state dir`);
  }
  if (st.mode & 0o077) fs.chmodSync(dir, 0o700);
}

/** Connect to the engine's socket; rejects with the system error (ENOENT, ECONNREFUSED: no engine). */
export function connectSocket(socket: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(socket);
    s.once('connect', () => { s.off('error', reject); resolve(s); });
    s.once('error', reject);
  });
}

/** How long a lock may stay empty or unreadable before it counts as damage, not as being written. */
const LOCK_GRACE_MS = 1000;

/**
 * Is the lock file free to take over? Its holder (a worker starting the engine) writes its pid just
 * after creating it. Free when that pid is dead or is not a process of our runtime (a pid reused after
 * a crash), or when the file holds no pid past a short grace (damaged: it would otherwise hold every
 * worker off until the start timeout).
 */
function staleLock(lock: string): boolean {
  let text: string, age: number;
  try { text = fs.readFileSync(lock, 'utf8'); age = Date.now() - fs.statSync(lock).mtimeMs; } catch { return false; }
  const holder = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(holder > 0)) return age > LOCK_GRACE_MS;
  if (!alive(holder)) return true;
  // The command name, readable for any process (its executable's link often is not): ours is `node`.
  try { return fs.readFileSync(`/proc/${holder}/comm`, 'utf8') !== fs.readFileSync('/proc/self/comm', 'utf8'); } catch { return false; }
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function tail(file: string, n = 12): string {
  try { return fs.readFileSync(file, 'utf8').trim().split('\n').slice(-n).join('\n'); } catch { return ''; }
}

/**
 * Make sure an engine answers on `paths.socket`, starting one if none does. Of the workers that find
 * none at once, the one that takes the lock file (O_EXCL) starts it, detached from its own process
 * group so that it outlives that worker; the others wait for the socket. A stale lock (see staleLock)
 * is taken over. Errors are SWARM_ERR_ENGINE_START with the engine's log tail. `signal` ends the
 * wait of a worker that does not start the engine itself.
 */
export async function ensureEngine(paths: EnginePaths, cfg: Omit<EngineConfig, 'socket'>, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  fs.mkdirSync(path.dirname(paths.lock), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try { (await connectSocket(paths.socket)).destroy(); return; } catch { /* none yet */ }
    // Another worker may have just seen it fail while this one waited for the lock.
    failedBefore(paths, cfg.model);
    if (Date.now() > deadline) throw new SwarmError('SWARM_ERR_ENGINE_START', `batched engine not ready after ${timeoutMs} ms\n${tail(paths.log)}`.trim());
    // A waiter may give up; the worker that holds the lock starts the engine to the end (a second
    // worker would otherwise start a second engine beside a loading one).
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new SwarmError('SWARM_ERR_SHUTDOWN', 'gave up waiting for the batched engine');
    let fd: number;
    try { fd = fs.openSync(paths.lock, 'wx', 0o600); } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (staleLock(paths.lock)) fs.rmSync(paths.lock, { force: true });
      else await sleep(50);
      continue;
    }
    try {
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      try { (await connectSocket(paths.socket)).destroy(); return; } catch { /* still none: ours to start */ }
      await startEngine(paths, cfg, deadline);
      return;
    } finally {
      fs.rmSync(paths.lock, { force: true });
    }
  }
}

async function startEngine(paths: EnginePaths, cfg: Omit<EngineConfig, 'socket'>, deadline: number): Promise<void> {
  const full: EngineConfig = { ...cfg, socket: paths.socket, info: paths.info };
  const out = fs.openSync(paths.log, 'a', 0o600);
  // One libuv pool thread: node-llama-cpp runs each decode and each sequence's sampling as a pool job,
  // and with the default four threads on a 2-core host the eight samplings of a step ran side by side
  // with one another and the llama.cpp threads (110M shape, 8 sequences: 175-189 tok/s with four,
  // 209-227 with one; docs/performance.md). In one queue they run back to back, which is all a step needs.
  const env: NodeJS.ProcessEnv = { ...process.env, UV_THREADPOOL_SIZE: '1' };
  const child = startProcess(process.execPath, [...hostExecArgv(), HOST_SCRIPT, JSON.stringify(full)], { stdio: ['ignore', out, out], env });
  fs.closeSync(out);
  let exited: string | undefined;
  let loadFailed = false;
  child.once('exit', (code, signal) => { exited = signal ? `was killed by ${signal}` : `exited with code ${code}`; loadFailed = code === LOAD_FAILED_EXIT; });
  // A CPU variant that faults (SIGILL), at load or at any decode: the next engine runs without it.
  const ladder = engineLadder({ selfBuilt: true, override: env.SWARM_TEST_EMBEDDED_ADDON || undefined }, env);
  child.once('exit', (_c, signal) => { if (signal === 'SIGILL' && child.pid) noteAddonSigill(child.pid, ladder, paths.log); });
  child.once('error', (err) => { exited = `could not be spawned: ${err.message}`; });
  child.unref();
  if (child.pid) fs.writeFileSync(paths.pid, String(child.pid), { mode: 0o600 });
  for (;;) {
    try { (await connectSocket(paths.socket)).destroy(); return; } catch { /* loading */ }
    if (exited && loadFailed) {
      const message = `batched engine could not load its model\n${tail(paths.log, 4)}`.trim();
      recordFailure(paths, cfg.model, message);
      throw new EngineLoadError(message);
    }
    if (exited) throw new SwarmError('SWARM_ERR_ENGINE_START', `batched engine ${exited} before it was ready\n${tail(paths.log)}`.trim());
    if (Date.now() > deadline) {
      if (child.pid) killGroup(child.pid, 'SIGKILL');
      throw new SwarmError('SWARM_ERR_ENGINE_START', `batched engine was not ready in time\n${tail(paths.log)}`.trim());
    }
    await sleep(30);
  }
}

/** What identifies one version of the model file: a failure recorded for another version is stale. */
function modelStamp(model: string): string {
  try { const st = fs.statSync(model); return `${st.size}:${st.mtimeMs}:${st.ino}`; } catch { return 'missing'; }
}

/**
 * The workers of a swarm all start the same engine: once one has seen its model fail to load, the
 * others fail at once with that message rather than each load it again (25 agents, 25 loads), until
 * the file changes.
 */
function recordFailure(paths: EnginePaths, model: string, message: string): void {
  try { fs.writeFileSync(paths.failed, JSON.stringify({ stamp: modelStamp(model), message }), { mode: 0o600 }); } catch { /* the next worker loads it again */ }
}

function failedBefore(paths: EnginePaths, model: string): void {
  let rec: { stamp?: unknown; message?: unknown };
  try { rec = JSON.parse(fs.readFileSync(paths.failed, 'utf8')) as typeof rec; } catch { return; }
  if (rec.stamp === modelStamp(model) && typeof rec.message === 'string') throw new EngineLoadError(rec.message);
  fs.rmSync(paths.failed, { force: true });
}

/** The pid of the engine in these paths, if it runs. */
export function enginePid(paths: EnginePaths): number | undefined {
  try {
    const pid = Number.parseInt(fs.readFileSync(paths.pid, 'utf8'), 10);
    return Number.isFinite(pid) && alive(pid) ? pid : undefined;
  } catch { return undefined; }
}
