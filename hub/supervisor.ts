import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { killGroup } from '../drivers/lifecycle.js';
import { isSameProcess, readPidFile, writePidFile } from './proc-id.js';

export interface SupervisorOptions {
  /** Worker ids to keep alive, one process each. */
  ids: string[];
  /** The command line that runs worker `id`. */
  command: (id: string) => { file: string; args: string[]; env?: NodeJS.ProcessEnv };
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
}

interface Slot {
  id: string; pid?: number; child?: ChildProcess; restarts: number; lastStart: number; timer?: NodeJS.Timeout;
  /** Armed while the worker is disconnected and its process alive: kills it if it does not reconnect. */
  grace?: NodeJS.Timeout;
}

/**
 * Keeps one process per worker id alive: spawns each in its own process group, respawns it when it
 * exits, or when it has been disconnected longer than the reconnect grace, and adopts workers still
 * running from a previous hub (pid files), so a restarted hub does not double the swarm.
 */
export class Supervisor {
  private readonly slots = new Map<string, Slot>();
  /** Pids this supervisor started or adopted: the only ones whose pid files it removes. */
  private readonly ours = new Set<number>();
  private stopping = false;
  private poll?: NodeJS.Timeout;

  constructor(private readonly opts: SupervisorOptions, private readonly log: Logger) {}

  start(): void {
    for (const id of this.opts.ids) {
      const slot: Slot = { id, restarts: 0, lastStart: 0 };
      this.slots.set(id, slot);
      // Only a process this swarm started (same start time and command) is adopted: a stale pid
      // file may name a pid the system has since given to something else.
      const adopted = this.readPid(id);
      if (adopted && alive(adopted)) {
        slot.pid = adopted;
        this.ours.add(adopted);
        this.log.info({ worker: id, pid: adopted }, 'adopted running worker');
      } else this.spawn(slot);
    }
    // Adopted workers are not our children: poll them.
    this.poll = setInterval(() => {
      for (const s of this.slots.values()) if (!s.child && s.pid && !alive(s.pid)) this.exited(s, 'adopted worker gone');
    }, 1000);
    this.poll.unref();
  }

  /** Pids of the worker processes. */
  pids(): number[] { return [...this.slots.values()].flatMap((s) => (s.pid ? [s.pid] : [])); }

  /**
   * The hub lost a worker's link (closed, or silent past dead_after). A link drop is not a process
   * death: a process that exits is respawned by its exit; a live one gets the reconnect grace, and
   * only if it has not reconnected by then is it killed (a hung process), and so respawned.
   */
  declareDead(id: string): void {
    const s = this.slots.get(id);
    if (!s?.pid || this.stopping || s.grace) return;
    if (!alive(s.pid)) return;
    const pid = s.pid;
    const graceMs = this.opts.reconnectGraceMs ?? 20_000;
    this.log.info({ worker: id, pid, graceMs }, 'worker link dropped; waiting for it to reconnect');
    s.grace = setTimeout(() => {
      s.grace = undefined;
      if (this.stopping || s.pid !== pid || !alive(pid)) return;
      this.log.warn({ worker: id, pid, graceMs }, 'worker did not reconnect in time; killing it');
      killGroup(pid, 'SIGKILL');
    }, graceMs);
    s.grace.unref();
  }

  /** The worker joined the hub (again): a pending kill for its dropped link is called off. */
  connected(id: string): void {
    const s = this.slots.get(id);
    if (!s?.grace) return;
    clearTimeout(s.grace);
    s.grace = undefined;
    this.log.info({ worker: id, pid: s.pid }, 'worker reconnected');
  }

  /** SIGTERM every worker's process group, then SIGKILL what is left after the grace period. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.poll) clearInterval(this.poll);
    for (const s of this.slots.values()) { if (s.timer) clearTimeout(s.timer); if (s.grace) clearTimeout(s.grace); if (s.pid) killGroup(s.pid, 'SIGTERM'); }
    const deadline = Date.now() + (this.opts.killGraceMs ?? 3000);
    while (Date.now() < deadline && this.pids().some(alive)) await sleep(25);
    for (const pid of this.pids()) if (alive(pid)) killGroup(pid, 'SIGKILL');
    while (this.pids().some(alive) && Date.now() < deadline + 2000) await sleep(25);
    for (const s of this.slots.values()) this.removePid(s.id);
  }

  private spawn(slot: Slot): void {
    const { file, args, env } = this.opts.command(slot.id);
    let out: number | 'ignore' = 'ignore';
    if (this.opts.stateDir) {
      fs.mkdirSync(path.join(this.opts.stateDir, 'logs'), { recursive: true });
      out = fs.openSync(path.join(this.opts.stateDir, 'logs', `${slot.id}.log`), 'a');
    }
    const child = spawn(file, args, { detached: true, stdio: ['ignore', out, out], env: env ?? process.env });
    if (typeof out === 'number') fs.closeSync(out);
    slot.child = child;
    slot.pid = child.pid;
    slot.lastStart = Date.now();
    if (child.pid) { this.ours.add(child.pid); this.writePid(slot.id, child.pid, [file, ...args]); }
    child.once('exit', (code, signal) => {
      if (slot.child === child) { slot.child = undefined; this.exited(slot, `exit code ${code} signal ${signal}`); }
    });
    child.once('error', (err) => this.log.error({ worker: slot.id, err }, 'worker spawn failed'));
  }

  private exited(slot: Slot, why: string): void {
    slot.pid = undefined;
    if (slot.grace) { clearTimeout(slot.grace); slot.grace = undefined; }
    this.removePid(slot.id);
    if (this.stopping) return;
    // Back off a worker that keeps crashing right after start.
    const quick = Date.now() - slot.lastStart < 5000;
    slot.restarts = quick ? slot.restarts + 1 : 0;
    const delay = Math.min(10_000, (this.opts.respawnDelayMs ?? 200) * 2 ** Math.min(slot.restarts, 6));
    this.log.warn({ worker: slot.id, why, respawnInMs: delay }, 'worker exited; respawning');
    slot.timer = setTimeout(() => { if (!this.stopping) this.spawn(slot); }, delay);
  }

  private pidFile(id: string): string | undefined {
    return this.opts.stateDir ? path.join(this.opts.stateDir, 'pids', `${id}.pid`) : undefined;
  }
  private readPid(id: string): number | undefined {
    const f = this.pidFile(id);
    const rec = f ? readPidFile(f) : undefined;
    if (!rec) return undefined;
    if (isSameProcess(rec, this.opts.stateDir)) return rec.pid;
    if (alive(rec.pid)) this.log.warn({ worker: id, pid: rec.pid }, 'pid file names a process this swarm did not start; not adopting it');
    return undefined;
  }
  private writePid(id: string, pid: number, cmd: string[]): void {
    const f = this.pidFile(id);
    if (f) writePidFile(f, pid, cmd);
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

/** True if a process with this pid exists (and is not a zombie we could reap). */
export function alive(pid: number): boolean {
  try { process.kill(pid, 0); } catch (e) { return (e as NodeJS.ErrnoException).code === 'EPERM'; }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch { return true; }
}

// The lifecycle file alone, not the drivers' face: the hub needs no driver registry.
export { killGroup };

function sleep(ms: number): Promise<void> { return new Promise((r) => setTimeout(r, ms)); }
