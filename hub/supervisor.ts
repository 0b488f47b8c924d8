import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { every } from '../protocol/index.js';
import { alive, killGroup, startProcess } from '../drivers/lifecycle.js';
import { isOldFormat, isSameProcess, readPidFile, writePidFile, type ProcId } from './proc-id.js';
import { lowerPriority } from './worker-nice.js';

/** A worker process that exited is started again after this long (growing for a crash loop). */
export const RESPAWN_DELAY_MS = 200;

export interface SupervisorOptions {
  /** Worker ids to keep alive, grouped by process: each inner list runs in one process. */
  groups: string[][];
  /** The command line that runs the workers `ids` in one process. */
  command: (ids: string[]) => { file: string; args: string[]; env?: NodeJS.ProcessEnv };
  /** Pid files and logs live here; omitted = no adoption across hub restarts, logs discarded. */
  stateDir?: string;
  /** Wait before respawning a worker that exited, growing to a cap for a crash loop. */
  respawnDelayMs?: number;
  killGraceMs?: number;
  /**
   * How long a worker whose link dropped may take to reconnect before its process is killed and
   * respawned (default 20 s; `swarm up` passes twice the hub's dead_after). A live worker
   * reconnects by itself with backoff; killing it would throw away its engine and its work.
   */
  reconnectGraceMs?: number;
  /** Whether the hub has a live link from this worker now (a grace that ends finds it back: no kill). */
  isConnected?: (id: string) => boolean;
  /**
   * Niceness added to each worker process it starts (default 0: as the hub). Set on the process's
   * main thread right after the spawn: what it starts later (its engine) inherits it. Where the
   * system does not allow it, the worker runs at the hub's priority and the hub logs that once.
   */
  nice?: number;
}

interface Slot {
  /** The worker ids this process runs (its first names its log file). */
  ids: string[]; pid?: number; child?: ChildProcess; restarts: number; lastStart: number; timer?: NodeJS.Timeout;
  /** Armed per worker while it is disconnected and its process alive: kills the process if it does not reconnect. */
  graces: Map<string, NodeJS.Timeout>;
}

/**
 * Keeps the worker processes alive, each running one or more worker ids: spawns each in its own
 * process group, respawns it when it exits, or when one of its workers has been disconnected longer
 * than the reconnect grace, and adopts processes still running from a previous hub (pid files, one
 * per worker id, all naming their process), so a restarted hub does not double the swarm.
 */
export class Supervisor {
  /** One slot per process, in start order. */
  private readonly slots: Slot[] = [];
  /** Each worker id's process. */
  private readonly byId = new Map<string, Slot>();
  /** Pids this supervisor started or adopted: the only ones whose pid files it removes. */
  private readonly ours = new Set<number>();
  private stopping = false;
  /** Stops the poll of adopted workers. */
  private poll?: () => void;

  constructor(private readonly opts: SupervisorOptions, private readonly log: Logger) {}

  start(): void {
    for (const ids of this.opts.groups) {
      if (ids.length === 0) continue;
      const slot: Slot = { ids, restarts: 0, lastStart: 0, graces: new Map() };
      this.slots.push(slot);
      for (const id of ids) this.byId.set(id, slot);
    }
    this.adoptOrStop();
    for (const slot of this.slots) if (slot.pid === undefined) this.spawn(slot);
    // Adopted workers are not our children: poll them.
    this.poll = every(1000, () => {
      for (const s of this.slots) if (!s.child && s.pid && !alive(s.pid)) this.exited(s, 'adopted worker gone');
    });
  }

  /**
   * Only a process this swarm started (same start time and command) is adopted: a stale pid file may
   * name a pid the system has since given to something else. And only for the ids it runs: a swarm
   * started again with another --procs or --agents, or with a pid file damaged, finds processes of
   * ours that run another set of ids; those are stopped (their tasks go back to the queue), not doubled.
   */
  private adoptOrStop(): void {
    const adopted = new Set<number>();
    const named = new Set<number>();
    for (const slot of this.slots) {
      const recs = slot.ids.flatMap((id) => this.ourProcess(id) ?? []);
      for (const r of recs) named.add(r.pid);
      const rec = recs.find((r) => !adopted.has(r.pid) && sameIds(runsIds(r), slot.ids));
      if (rec) { adopted.add(rec.pid); this.adopt(slot, rec); }
    }
    // Pid files of ids not wanted now (fewer agents): their processes of ours go, and the files too.
    for (const id of this.pidFileIds()) {
      if (this.byId.has(id)) continue;
      const rec = this.ourProcess(id);
      if (rec) named.add(rec.pid);
      const f = this.pidFile(id);
      if (f) fs.rmSync(f, { force: true });
    }
    for (const pid of named) {
      if (adopted.has(pid)) continue;
      this.log.warn({ pid }, 'a worker process of this swarm runs other worker ids than wanted now; stopping it');
      killGroup(pid, 'SIGKILL');
    }
  }

  private adopt(slot: Slot, rec: ProcId): void {
    slot.pid = rec.pid;
    this.ours.add(rec.pid);
    // Every id's pid file names it again (one may have been damaged or missing).
    for (const id of slot.ids) if (rec.cmd) this.writePid(id, rec.pid, rec.cmd.split(' '), rec.start);
    // It must bring every worker back: one it runs no more (stopped before the hub died) would
    // otherwise never join, and nothing would notice.
    for (const id of slot.ids) this.armGrace(slot, id);
    this.log.info({ workers: slot.ids, pid: rec.pid }, 'adopted running worker process');
  }

  /** True if worker `id` runs in a process this supervisor keeps. */
  runs(id: string): boolean { return this.byId.has(id); }

  /** Pids of the worker processes. */
  pids(): number[] { return this.slots.flatMap((s) => (s.pid ? [s.pid] : [])); }

  /**
   * The hub lost a worker's link (closed, or silent past dead_after). A link drop is not a process
   * death: a process that exits is respawned by its exit; a live one gets the reconnect grace, and
   * only if it has not reconnected by then is it killed (a hung process), and so respawned.
   */
  declareDead(id: string): void {
    const s = this.byId.get(id);
    if (!s?.pid || this.stopping || s.graces.has(id)) return;
    if (!alive(s.pid)) return;
    this.log.info({ worker: id, pid: s.pid, graceMs: this.graceMs }, 'worker link dropped; waiting for it to reconnect');
    this.armGrace(s, id);
  }

  private get graceMs(): number { return this.opts.reconnectGraceMs ?? 20_000; }

  /** Kill the process of `id` if `id` has not (re)joined the hub within the grace. */
  private armGrace(s: Slot, id: string): void {
    const pid = s.pid;
    const t = setTimeout(() => {
      s.graces.delete(id);
      if (this.stopping || pid === undefined || s.pid !== pid || !alive(pid) || this.opts.isConnected?.(id)) return;
      // A process's workers share it: one hung worker takes the others with it, and they come back together.
      this.log.warn({ worker: id, workers: s.ids, pid, graceMs: this.graceMs }, 'worker did not reconnect in time; killing its process');
      killGroup(pid, 'SIGKILL');
    }, this.graceMs);
    t.unref();
    s.graces.set(id, t);
  }

  /** The worker joined the hub (again): a pending kill for its dropped link is called off. */
  connected(id: string): void {
    const s = this.byId.get(id);
    const t = s?.graces.get(id);
    if (!s || !t) return;
    clearTimeout(t);
    s.graces.delete(id);
    this.log.info({ worker: id, pid: s.pid }, 'worker reconnected');
  }

  /** SIGTERM every worker's process group, then SIGKILL what is left after the grace period. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.poll?.();
    for (const s of this.slots) { if (s.timer) clearTimeout(s.timer); this.clearGraces(s); if (s.pid) killGroup(s.pid, 'SIGTERM'); }
    const deadline = Date.now() + (this.opts.killGraceMs ?? 3000);
    while (Date.now() < deadline && this.pids().some(alive)) await sleep(25);
    for (const pid of this.pids()) if (alive(pid)) killGroup(pid, 'SIGKILL');
    while (this.pids().some(alive) && Date.now() < deadline + 2000) await sleep(25);
    for (const s of this.slots) this.removePids(s);
  }

  private spawn(slot: Slot): void {
    const { file, args, env } = this.opts.command(slot.ids);
    let out: number | 'ignore' = 'ignore';
    let child: ChildProcess;
    try {
      // Its log file too: one that cannot be made (a full disk) is a start that failed, not the hub's end.
      if (this.opts.stateDir) {
        fs.mkdirSync(path.join(this.opts.stateDir, 'logs'), { recursive: true });
        out = fs.openSync(path.join(this.opts.stateDir, 'logs', `${slot.ids[0]}.log`), 'a');
      }
      child = startProcess(file, args, { stdio: ['ignore', out, out], env });
    } catch (err) {
      // Thrown, not emitted (E2BIG: arguments or environment past the kernel's bound): a supervisor
      // that cannot start a worker says so and tries again later; the hub goes on.
      this.log.error({ workers: slot.ids, err }, 'worker spawn failed');
      slot.lastStart = Date.now();
      this.exited(slot, `spawn failed: ${(err as Error).message}`);
      return;
    } finally { if (typeof out === 'number') fs.closeSync(out); }
    slot.child = child;
    slot.pid = child.pid;
    slot.lastStart = Date.now();
    if (child.pid && this.opts.nice) this.lower(child.pid);
    child.once('exit', (code, signal) => {
      if (slot.child === child) { slot.child = undefined; this.exited(slot, `exit code ${code} signal ${signal}`); }
    });
    if (child.pid) {
      this.ours.add(child.pid);
      try { for (const id of slot.ids) this.writePid(id, child.pid, [file, ...args]); } catch (err) {
        // `swarm down` finds the swarm's processes by their pid files: one it cannot record would
        // outlive it. Stopped at once (its exit respawns it later, with backoff); thrown on, this
        // ended the hub at start (the process left running) or, on a respawn, crashed it.
        this.log.error({ workers: slot.ids, pid: child.pid, err: (err as Error).message }, 'cannot record the worker process in its pid file; stopping it and trying again later');
        killGroup(child.pid, 'SIGKILL');
      }
    }
    child.once('error', (err) => this.log.error({ workers: slot.ids, err }, 'worker spawn failed'));
  }

  private niceRefused = false;

  /** The worker process below the hub in CPU priority (harmless where not permitted). */
  private lower(pid: number): void {
    try { lowerPriority(pid, this.opts.nice!); } catch (err) {
      if (this.niceRefused) return;
      this.niceRefused = true;
      this.log.warn({ pid, nice: this.opts.nice, err: (err as Error).message }, 'cannot lower the worker processes\' priority; they run at the hub\'s');
    }
  }

  private exited(slot: Slot, why: string): void {
    slot.pid = undefined;
    this.clearGraces(slot);
    this.removePids(slot);
    if (this.stopping) return;
    // Back off a worker that keeps crashing right after start.
    const quick = Date.now() - slot.lastStart < 5000;
    slot.restarts = quick ? slot.restarts + 1 : 0;
    const delay = Math.min(10_000, (this.opts.respawnDelayMs ?? RESPAWN_DELAY_MS) * 2 ** Math.min(slot.restarts, 6));
    this.log.warn({ workers: slot.ids, why, respawnInMs: delay }, 'worker process exited; respawning');
    slot.timer = setTimeout(() => { if (!this.stopping) this.spawn(slot); }, delay);
  }

  private clearGraces(s: Slot): void {
    for (const t of s.graces.values()) clearTimeout(t);
    s.graces.clear();
  }

  /** Worker ids that have a pid file. */
  private pidFileIds(): string[] {
    if (!this.opts.stateDir) return [];
    try { return fs.readdirSync(path.join(this.opts.stateDir, 'pids')).filter((f) => f.endsWith('.pid')).map((f) => f.slice(0, -4)); } catch { return []; }
  }

  private removePids(s: Slot): void { for (const id of s.ids) this.removePid(id); }

  private pidFile(id: string): string | undefined {
    return this.opts.stateDir ? path.join(this.opts.stateDir, 'pids', `${id}.pid`) : undefined;
  }
  /** The live process of ours that `id`'s pid file names, with what was recorded of it. */
  private ourProcess(id: string): ProcId | undefined {
    const f = this.pidFile(id);
    const rec = f ? readPidFile(f) : undefined;
    if (!rec || !alive(rec.pid)) return undefined;
    if (isSameProcess(rec)) return rec;
    if (isOldFormat(rec)) this.log.warn({ worker: id, pid: rec.pid }, 'pid file without a start time (older format): it cannot tell its process from a later one given the pid; ignoring it');
    else this.log.warn({ worker: id, pid: rec.pid }, 'pid file names a process this swarm did not start; not adopting it');
    return undefined;
  }
  private writePid(id: string, pid: number, cmd: string[], start?: string): void {
    const f = this.pidFile(id);
    if (f) writePidFile(f, pid, cmd, start);
  }
  /**
   * Only a file that names a process this supervisor started (or nothing readable): the state
   * directory may have been replaced under a running hub, and the new swarm's files are not ours.
   */
  private removePid(id: string): void {
    const f = this.pidFile(id);
    if (!f) return;
    const rec = readPidFile(f);
    if (!rec || this.ours.has(rec.pid)) fs.rmSync(f, { force: true });
  }
}

/**
 * The worker ids a recorded worker command runs (`--ids A,B` or `--id A`); undefined when the record
 * has no command (a pid file from before commands were recorded: one worker each then).
 */
function runsIds(rec: ProcId): string[] | undefined {
  if (rec.cmd === undefined) return undefined;
  const words = rec.cmd.split(' ');
  const many = words.indexOf('--ids');
  if (many >= 0) return words[many + 1]?.split(',');
  const one = words.indexOf('--id');
  return one >= 0 && words[one + 1] !== undefined ? [words[one + 1]!] : undefined;
}

function sameIds(a: string[] | undefined, want: string[]): boolean {
  if (a === undefined) return want.length === 1;
  return a.length === want.length && a.every((id, i) => id === want[i]);
}

// The lifecycle file alone, not the drivers' face: the hub needs no driver registry.
export { alive, killGroup };

function sleep(ms: number): Promise<void> { return new Promise((r) => setTimeout(r, ms)); }
