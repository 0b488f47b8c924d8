import fs from 'node:fs';
import path from 'node:path';
import { inThisNamespace, localProcess, ownCommand, readPidFile, writePidFile, type ProcId } from '../hub/proc-id.js';
import { accessDenied, checkStateWritable, stateAccess } from './state.js';

/**
 * `swarm up` marks the state directory while it starts: between its start and the hub's hub.json
 * (choosing a model, spawning the hub, the hub taking its lock) nothing else says a swarm is coming,
 * and a `swarm down` in that window said "no swarm was running" while one came up behind it.
 */
function startingDir(dir: string): string { return path.join(dir, 'starting'); }

/** Mark this process as starting a swarm in `dir`; the mark goes when the process exits, or when the function returned is called. */
export function markStarting(dir: string): () => void {
  const file = path.join(startingDir(dir), `${process.pid}.json`);
  const made = !fs.existsSync(dir);
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    checkStateWritable(dir);
    writePidFile(file, process.pid, ownCommand());
  } catch (e) {
    // Another user's state directory (or one under a folder this user may not write): said as such,
    // as down, status and submit say it, not as an internal EACCES.
    if (accessDenied(e, true)) throw stateAccess((e as NodeJS.ErrnoException).path ?? dir, e, 'write');
    throw e;
  }
  const unmark = (): void => {
    try { fs.rmSync(file, { force: true }); } catch { /* the directory is gone */ }
    // An `up` refused before it started anything leaves no trace: the folders it made only for the
    // mark go too (rmdir removes only empty ones, so nothing a hub wrote meanwhile).
    try { fs.rmdirSync(startingDir(dir)); } catch { /* not empty, or gone */ }
    if (made) try { fs.rmdirSync(dir); } catch { /* the swarm's files are in it */ }
  };
  process.once('exit', unmark);
  return () => { process.removeListener('exit', unmark); unmark(); };
}

/**
 * The `swarm up` processes still starting in `dir`: `live`, those this record proves are the ones that
 * wrote it; `unseen`, marks written in a pid namespace whose processes this one cannot see (the host's,
 * read in a container): their pid says nothing here, so such a start is judged by what it makes (the
 * directory's lock, its hub's answer) and never signalled from here.
 */
export function startingProcs(dir: string): { live: ProcId[]; unseen: { rec: ProcId; file: string }[] } {
  let names: string[];
  const out: { live: ProcId[]; unseen: { rec: ProcId; file: string }[] } = { live: [], unseen: [] };
  try { names = fs.readdirSync(startingDir(dir)); } catch { return out; }
  for (const n of names) {
    if (!/^\d+\.json$/.test(n)) continue;
    const file = path.join(startingDir(dir), n);
    const rec = readPidFile(file);
    const here = rec && localProcess(rec);
    if (here) out.live.push(here);
    else if (rec && !inThisNamespace(rec)) out.unseen.push({ rec, file });
    // A mark left by a process killed -9: nothing starts under it any more.
    else try { fs.rmSync(file, { force: true }); } catch { /* raced with its owner */ }
  }
  return out;
}
