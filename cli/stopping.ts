import fs from 'node:fs';
import path from 'node:path';
import { localProcess, ownCommand, readPidFile, writePidFile } from '../hub/proc-id.js';
import { accessDenied, stateAccess } from './state.js';
import { SwarmError } from '../protocol/errors.js';
import { lockStateDir, lockStopping, stoppingHeld, type StateLock } from './state-lock.js';

/**
 * While `swarm down` stops a state directory's swarm it holds the directory's stop lock
 * (cli/state-lock.ts) and names itself in `<dir>/stopping.json`. A second `down` run meanwhile found
 * the hub half gone and said "no swarm was running" while the first was still stopping it; a
 * `swarm up` could start a hub beside the stopping one, whose leftovers the first `down` then killed.
 */
const recordPath = (dir: string): string => path.join(dir, 'stopping.json');

/** The `swarm down` that is stopping the swarm in `dir` now, by pid, if its record proves it. */
export function stoppingPid(dir: string): number | undefined {
  const rec = readPidFile(recordPath(dir));
  return rec ? localProcess(rec)?.pid : undefined;
}

/**
 * The stop lock, taken. `waited`: another `swarm down` held it first and this one waited for it to
 * end (`waitedFor`: its pid, if known); `unfinished`: it ended without finishing (killed: its record is left).
 */
export interface StopTurn { release(): void; waited?: boolean; waitedFor?: number; unfinished?: boolean }

/**
 * Take the stop lock of `dir`; while another `swarm down` holds it, wait (at most `ms`, `onWait`
 * told once with its pid) for that stop to end. `{ busy }`: still held after `ms`. Nothing to lock
 * where the directory does not exist (nothing runs there) or there are no locks (not Linux).
 */
export async function takeStopTurn(dir: string, ms: number, onWait: (pid: number | undefined) => void): Promise<StopTurn | { busy: number | undefined }> {
  if (!fs.existsSync(dir)) return { release: () => {} };
  const deadline = Date.now() + ms;
  let waitedFor: number | undefined;
  let waited = false;
  for (;;) {
    let lock: StateLock | 'held' | undefined;
    try { lock = await lockStopping(dir); } catch (e) { throw accessError(dir, e); }
    if (lock === undefined) return { release: () => {} };
    if (lock !== 'held') {
      // A record left behind: the `down` that wrote it ended before its release (it was killed).
      const unfinished = waited && fs.existsSync(recordPath(dir));
      return { release: record(dir, lock), ...(waited ? { waited, waitedFor, unfinished } : {}) };
    }
    // The lock is taken before the record is written: the pid may come a moment later.
    waitedFor ??= stoppingPid(dir);
    if (!waited) { waited = true; onWait(waitedFor); }
    if (Date.now() >= deadline) return { busy: waitedFor };
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Name this process in the record; the release removes it (a killed `down` leaves one its successor overwrites). */
function record(dir: string, lock: StateLock): () => void {
  try { writePidFile(recordPath(dir), process.pid, ownCommand()); } catch { /* the lock alone still holds others off */ }
  return () => {
    try { if (readPidFile(recordPath(dir))?.pid === process.pid) fs.rmSync(recordPath(dir), { force: true }); } catch { /* gone */ }
    lock.release();
  };
}

/** How long a start (`swarm up`, or `swarm hub` on its own) waits for a `swarm down` that is stopping the swarm of its state directory. */
export const AWAIT_DOWN_MS = 60_000;

/**
 * For `swarm up`: wait (at most `ms`) while a `swarm down` stops the swarm in `dir`, `onWait` told
 * once. False if it is still stopping after `ms`.
 */
export async function awaitStopped(dir: string, ms: number, onWait: (pid: number | undefined) => void): Promise<boolean> {
  const deadline = Date.now() + ms;
  let told = false;
  while (await stoppingHeld(dir)) {
    if (!told) { told = true; onWait(stoppingPid(dir)); }
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

function accessError(dir: string, e: unknown): unknown {
  return accessDenied(e, true) ? stateAccess((e as NodeJS.ErrnoException).path ?? dir, e, 'write') : e;
}

/**
 * For a hub started on its own (`swarm hub`, not by `swarm up`, which waited before it marked its
 * start): the directory's lock, `lock` (taken), kept once no `swarm down` is stopping the swarm in
 * `dir`. While one is, the lock is let go, so that `down` does not wait for this hub as one starting
 * (each would wait for the other), and taken again after it, `onWait` told once. Checked with the lock
 * held: a `down` that starts after that check finds this hub by its lock and stops it once it is up.
 * SWARM_ERR_ALREADY_RUNNING if a `down` still stops the swarm after `ms`.
 */
export async function lockAfterDown(dir: string, lock: StateLock | undefined, ms: number, onWait: (pid: number | undefined) => void): Promise<StateLock | undefined> {
  const deadline = Date.now() + ms;
  let told = false;
  let held = lock;
  while (held && await stoppingHeld(dir)) {
    held.release();
    held = undefined;
    const free = await awaitStopped(dir, Math.max(0, deadline - Date.now()), (pid) => { if (!told) { told = true; onWait(pid); } });
    if (!free) throw new SwarmError('SWARM_ERR_ALREADY_RUNNING', `a \`swarm down\` is still stopping the swarm in ${dir} after ${ms} ms`);
    held = await lockStateDir(dir);
  }
  return held;
}
