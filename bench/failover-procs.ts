import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CLI } from './args.js';

/** Shared by the failover benches: `swarm` processes in the background, the hub file, the control API, agents' status files. */

export interface HubFile { pid: number; control: { host: string; port: number }; token?: string }
/** One agent as its worker process's failover status file shows it. */
export interface FailoverAgent { id: string; mode: string; coordinating: boolean; gossip_since?: number; last_final_at?: number; replica: { done: number; failed: number; size: number } }

const procs: ChildProcess[] = [];

/** Start `swarm ARGS` detached (its own process group); stderr/stdout to `errFile` if given. Killed when the bench exits. */
export function bg(args: string[], errFile?: string): ChildProcess {
  const err = errFile ? fs.openSync(errFile, 'a') : 'ignore';
  const c = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', err, err], detached: true });
  if (typeof err === 'number') fs.closeSync(err);
  procs.push(c);
  return c;
}

/** Signal a background process's group; ignores one that is gone. */
export function kill(c: ChildProcess, sig: NodeJS.Signals = 'SIGKILL'): void { try { process.kill(-c.pid!, sig); } catch { /* gone */ } }

/** Kill every process `bg` started. */
export function killAll(): void { for (const c of procs) kill(c); }
process.on('exit', killAll);

export function hubFile(dir: string): HubFile | undefined {
  try { return JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as HubFile; } catch { return undefined; }
}

/** Call the control API of the state dir's hub; undefined if none answers (within `timeoutMs`, if given). */
export async function api<T>(dir: string, method: string, p: string, body?: unknown, timeoutMs?: number): Promise<T | undefined> {
  const h = hubFile(dir);
  if (!h) return undefined;
  try {
    // A hub keeps a token in its state dir (generated when none is given): the control API wants it.
    const headers = { 'content-type': 'application/json', ...(h.token ? { authorization: `Bearer ${h.token}` } : {}) };
    const res = await fetch(`http://${h.control.host}:${h.control.port}${p}`, { method, body: body === undefined ? undefined : JSON.stringify(body), headers, ...(timeoutMs ? { signal: AbortSignal.timeout(timeoutMs) } : {}) });
    return (await res.json()) as T;
  } catch { return undefined; }
}

/** Every agent in the state dir's failover status files. */
export function agents(dir: string): FailoverAgent[] {
  const d = path.join(dir, 'failover');
  let names: string[] = [];
  try { names = fs.readdirSync(d); } catch { return []; }
  return names.filter((n) => n.endsWith('.json')).flatMap((n) => { try { return (JSON.parse(fs.readFileSync(path.join(d, n), 'utf8')) as { agents: FailoverAgent[] }).agents; } catch { return []; } });
}

/** Results per task id in the state dir's journal: ids with none (lost) and with more than one (duplicated). */
export function tally(dir: string, ids: string[]): { lost: number; duplicated: number } {
  const count = new Map<string, number>();
  for (const l of fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').split('\n')) {
    if (!l) continue;
    try { const r = JSON.parse(l) as { t: string; id?: string }; if (r.t === 'result' && r.id) count.set(r.id, (count.get(r.id) ?? 0) + 1); } catch { /* torn */ }
  }
  return { lost: ids.filter((id) => !count.get(id)).length, duplicated: ids.filter((id) => (count.get(id) ?? 0) > 1).length };
}
