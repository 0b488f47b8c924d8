import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { every } from '../protocol/index.js';
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

/** A worker process's status file: `<state-dir>/failover/<pid>.json`. */
export interface FailoverStatusFile { pid: number; at: number; agents: AgentFailoverStatus[] }

/** The file a worker process writes its failover status to, under a state directory. */
export function failoverStatusPath(stateDir: string, pid = process.pid): string {
  return path.join(stateDir, 'failover', `${pid}.json`);
}

/** Read the status files of live-looking worker processes (written within `freshMs`). */
export function readFailoverStatus(stateDir: string, freshMs = 5000): FailoverStatusFile[] {
  const dir = path.join(stateDir, 'failover');
  let names: string[] = [];
  try { names = fs.readdirSync(dir); } catch { return []; }
  const now = Date.now();
  return names.filter((n) => n.endsWith('.json')).flatMap((n) => {
    try {
      const f = JSON.parse(fs.readFileSync(path.join(dir, n), 'utf8')) as FailoverStatusFile;
      return now - f.at <= freshMs ? [f] : [];
    } catch { return []; }
  });
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
    return { pid: process.pid, at: Date.now(), agents };
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
    const tmp = `${this.file}.tmp`;
    try {
      fs.writeFileSync(tmp, JSON.stringify(snap));
      fs.renameSync(tmp, this.file);
      this.last = body;
      this.lastAt = snap.at;
    } catch (err) { this.log.warn({ err }, 'writing failover status failed'); }
  }
}
