import fs from 'node:fs';
import path from 'node:path';
import { pidFromNamespace, pidNamespace, procStart } from '../protocol/proc-stat.js';
import { writeFileAtomic } from '../protocol/atomic-file.js';

/**
 * What names a process beyond its pid. Pids are reused: a pid file left by a swarm that died can
 * point, a day later, at someone's editor. The start time (clock ticks since boot, field 22 of
 * /proc/PID/stat) never repeats for a pid until reboot, and the command line says what it runs.
 */
export interface ProcId {
  pid: number; start?: string; cmd?: string;
  /** The pid namespace `pid` belongs to (that of the writer); none in older records (read as this one's). */
  pidns?: string;
}

export { pidNamespace, procStart };

/** Command line of a live process, arguments joined by spaces. */
export function procCmd(pid: number): string | undefined {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' '); } catch { return undefined; }
}

/**
 * True only if the process `id` names is alive and is the one recorded: same start time, and the
 * same command line when one was recorded. A record without a start time (an older pid file or
 * hub.json) is never ours: a command line that merely mentions the state directory or the CLI is
 * also a `tail -f` of its log, or another swarm's hub. Callers warn about such records (`isOldFormat`).
 */
export function isSameProcess(id: ProcId): boolean {
  if (id.start === undefined || !inThisNamespace(id)) return false;
  const start = procStart(id.pid);
  if (start === undefined || start !== id.start) return false;
  return id.cmd === undefined || procCmd(id.pid) === id.cmd;
}

/** Whether a record's pid is one of this pid namespace (or says nothing of its namespace: an older record). */
export function inThisNamespace(id: ProcId): boolean { return id.pidns === undefined || id.pidns === pidNamespace(); }

/**
 * The live process a record names, as this pid namespace sees it: the record with `pid` its pid here.
 * A record written in another namespace (a hub in a container, read on the host) is looked up by its
 * namespace and its pid there, then checked as `isSameProcess` checks. Undefined if it is gone, is
 * another process now, or cannot be seen from here (a record of the host, read in a container).
 */
export function localProcess(id: ProcId): ProcId | undefined {
  if (inThisNamespace(id)) return isSameProcess(id) ? id : undefined;
  const pid = pidFromNamespace(id.pidns!, id.pid);
  if (pid === undefined) return undefined;
  const here: ProcId = { ...id, pid, pidns: pidNamespace() };
  return isSameProcess(here) ? here : undefined;
}

/** A record from before start times were kept: it cannot tell its process from a later one with the pid. */
export function isOldFormat(id: ProcId): boolean { return id.start === undefined; }

/**
 * This process's command line as /proc shows it (what `isSameProcess` compares): `process.argv` is
 * not it (node puts its own path and the script's absolute path there; a `swarm` run through its
 * shebang or by a relative path shows `node ./dist/cli/main.js …`).
 */
export function ownCommand(): string[] {
  try {
    const words = fs.readFileSync('/proc/self/cmdline', 'utf8').replace(/\0+$/, '').split('\0');
    if (words.length && words[0]) return words;
  } catch { /* no /proc */ }
  return process.argv;
}

/** Record a process we started: pid, start time and the command line it was given. */
export function writePidFile(file: string, pid: number, cmd: string[], start = procStart(pid)): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Our children share our pid namespace: the pid is one of it.
  const pidns = pidNamespace();
  const rec: ProcId = { pid, start, cmd: cmd.join(' '), ...(pidns ? { pidns } : {}) };
  writeFileAtomic(file, JSON.stringify(rec) + '\n');
}

/** A pid file: this format (JSON) or an older one (the pid alone, no start time). */
export function readPidFile(file: string): ProcId | undefined {
  let text: string;
  try { text = fs.readFileSync(file, 'utf8').trim(); } catch { return undefined; }
  if (/^\d+$/.test(text)) return { pid: Number(text) };
  try {
    const v = JSON.parse(text) as Partial<ProcId>;
    if (!Number.isSafeInteger(v.pid) || (v.pid ?? 0) <= 0) return undefined;
    return { pid: v.pid!, start: typeof v.start === 'string' ? v.start : undefined, cmd: typeof v.cmd === 'string' ? v.cmd : undefined, ...(typeof v.pidns === 'string' ? { pidns: v.pidns } : {}) };
  } catch { return undefined; }
}
