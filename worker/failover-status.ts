import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { every } from '../protocol/index.js';
import { pidNamespace, procStart } from '../protocol/proc-stat.js';
import { writeFileAtomic } from '../protocol/atomic-file.js';
import type { Agent } from './agent.js';
import type { Lease, Replica } from './gossip/replica.js';

/** One agent's failover status as written for `swarm status` (which reads it when no hub answers). */
export interface AgentFailoverStatus {
  id: string; mode: string; coordinator: string; epoch: number; live: number; hub: string;
  coordinating: boolean; peer_addr: string; gossip_since?: number; last_final_at?: number;
  /** Takes in the whole replicated state in gossip mode: a holder the hub elected, or the acting coordinator. */
  holds_state?: boolean;
  /** The hub elected it a keeper of the open tasks (its process holds no replica). */
  keeps_open?: boolean;
  replica: { queued: number; leased: number; done: number; failed: number; size: number };
  /** In gossip mode, when at most 5 tasks are left: those tasks and their leases (what a stalled run waits on). */
  left?: { id: string; lease?: Lease }[];
  /**
   * While this member coordinates: leases it took back (handed back, lapsed, or held by a member gone
   * dead or silent), how many its own stalls cost and so used no attempt, and tasks it failed for good.
   */
  leases?: { revoked: number; forgiven: number; stalls: number; failed: number };
  /** Topology runs this member knows (holders): driving now, and driven to their end in gossip mode. */
  runs?: { known: string[]; driving: number; finished: { run: string; verdict?: string }[]; ended_on_hub: string[] };
}

/**
 * A worker process's status file: `<state-dir>/failover/<pid>.json`. `start` (the process's start
 * time, clock ticks since boot) and `pidns` (its pid namespace) let a reader tell a live writer from
 * a dead one or a reused pid, where it shares the writer's pid namespace.
 */
export interface FailoverStatusFile { pid: number; at: number; start?: string; pidns?: string; agents: AgentFailoverStatus[] }

/** A status file left by a worker process that is gone: shown as such, never as a live swarm. */
export interface StaleFailoverStatus { pid: number; age_s: number; why: string }


/** The file a worker process writes its failover status to, under a state directory. */
export function failoverStatusPath(stateDir: string, pid = process.pid): string {
  return path.join(stateDir, 'failover', `${pid}.json`);
}

/** Read the status files of live-looking worker processes (written within `freshMs`). */
export function readFailoverStatus(stateDir: string, freshMs = 5000): FailoverStatusFile[] {
  return readFailoverStatusAll(stateDir, freshMs).live;
}

/**
 * Every status file, split into live ones and those a gone process left (not rewritten within
 * `freshMs`, or, in this pid namespace, its pid dead or now another process's). Right after every
 * worker died, a file only seconds old read as a swarm in gossip mode with an acting coordinator.
 */
export function readFailoverStatusAll(stateDir: string, freshMs = 5000): { live: FailoverStatusFile[]; stale: StaleFailoverStatus[] } {
  const dir = path.join(stateDir, 'failover');
  const out = { live: [] as FailoverStatusFile[], stale: [] as StaleFailoverStatus[] };
  let names: string[] = [];
  try { names = fs.readdirSync(dir); } catch { return out; }
  const now = Date.now();
  const ns = pidNamespace();
  for (const n of names.filter((x) => x.endsWith('.json'))) {
    let f: FailoverStatusFile;
    try { f = JSON.parse(fs.readFileSync(path.join(dir, n), 'utf8')) as FailoverStatusFile; } catch { continue; }
    if (typeof f?.pid !== 'number' || typeof f.at !== 'number' || !Array.isArray(f.agents)) continue;
    const age_s = Math.round((now - f.at) / 100) / 10;
    // A writer in another pid namespace (another container) is judged by the file's age alone.
    const here = f.pidns !== undefined && f.pidns === ns && f.start !== undefined;
    const start = here ? procStart(f.pid) : undefined;
    const why = now - f.at > freshMs ? `not rewritten for ${age_s} s`
      : here && start === undefined ? `pid ${f.pid} is not alive`
        : here && start !== f.start ? `pid ${f.pid} is another process now` : undefined;
    if (why) out.stale.push({ pid: f.pid, age_s, why }); else out.live.push(f);
  }
  return out;
}

/**
 * Writes the agents' failover status (atomically: temp file, then rename), because in gossip mode there
 * is no hub to ask. Checked every second; written when it changed, on a mode change at once, and at
 * least every `refreshMs` so readers can tell a live file (`readFailoverStatus`'s 5 s) from a stale
 * one. Idle workers in star mode thus write every few seconds, not every second: with 25 worker
 * processes on 2 cores, the writes were the largest idle cost of failover. Removed on stop.
 */
export class FailoverStatusWriter {
  /** Stops the check (on the process's clock, with the heartbeats). */
  private timer?: () => void;
  private last = '';
  private lastAt = 0;
  private soon = false;
  /** Who writes: read once (a pid namespace and start time do not change). */
  private readonly self = ((start, pidns) => ({ ...(start ? { start } : {}), ...(pidns ? { pidns } : {}) }))(procStart('self'), pidNamespace());

  constructor(private readonly file: string, private readonly agents: readonly Agent[], private readonly log: Logger, private readonly everyMs = 1000, private readonly refreshMs = 3000) {}

  start(): void {
    fs.mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    this.write(true);
    this.timer = every(this.everyMs, () => this.write(false));
    for (const a of this.agents) a.failover?.node.onMode(() => {
      if (this.soon || !this.timer) return;
      this.soon = true;
      setImmediate(() => { this.soon = false; if (this.timer) this.write(true); });
    });
  }

  stop(): void {
    this.timer?.();
    this.timer = undefined;
    try { fs.rmSync(this.file, { force: true }); } catch { /* gone */ }
  }

  snapshot(): FailoverStatusFile {
    const agents = this.agents.flatMap((a): AgentFailoverStatus[] => {
      const fo = a.failover;
      if (!fo) return [];
      const s = fo.status();
      return [{
        id: fo.node.id, mode: s.mode, coordinator: s.coordinator, epoch: s.epoch, live: s.live, hub: s.hub,
        coordinating: fo.node.coordinator.isCoordinating, peer_addr: fo.transport.addr, gossip_since: fo.node.gossipSince, last_final_at: fo.lastFinalAt,
        holds_state: fo.node.sync.pulls, keeps_open: fo.keepsOpenTasks || undefined,
        replica: { ...fo.node.replica.counts(), size: fo.node.replica.size },
        left: this.left(fo.node.replica, s.mode),
        leases: fo.node.coordinator.isCoordinating ? (({ revoked, forgiven, stalls, failed }) => ({ revoked, forgiven, stalls, failed }))(fo.node.coordinator.stats) : undefined,
        runs: fo.runs.active.length || fo.runs.outcomes.size || fo.runs.endedOnHub.length ? {
          known: fo.runs.active, driving: fo.runs.drivingCount,
          finished: [...fo.runs.outcomes].map(([run, o]) => ({ run, verdict: o.verdict })),
          ended_on_hub: fo.runs.endedOnHub,
        } : undefined,
      }];
    });
    return { pid: process.pid, at: Date.now(), ...this.self, agents };
  }

  private left(r: Replica, mode: string): AgentFailoverStatus['left'] {
    const c = r.counts();
    if (mode !== 'gossip' || c.queued + c.leased === 0 || c.queued + c.leased > 5) return undefined;
    return r.openIds().map((id) => ({ id, lease: r.get(id)?.lease }));
  }

  private write(force: boolean): void {
    const snap = this.snapshot();
    const body = JSON.stringify(snap.agents);
    if (!force && body === this.last && snap.at - this.lastAt < this.refreshMs) return;
    try {
      // Whole or not at all; a failed write (a full disk) leaves no temporary file behind.
      writeFileAtomic(this.file, JSON.stringify(snap), 0o666);
      this.last = body;
      this.lastAt = snap.at;
    } catch (err) { this.log.warn({ err }, 'writing failover status failed'); }
  }
}
