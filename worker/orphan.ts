import { every } from '../protocol/index.js';
import { statFields as stat } from '../protocol/proc-stat.js';

/** What the guard reads of the worker process. */
export interface OrphanSignals {
  /** Some agent of the process holds a link to a hub now. */
  hubLinked(): boolean;
  /** Some agent of the process sees a live failover peer (a member other than itself). */
  peersLive(): boolean;
  /** Every live peer in another process said lately that its process is orphaned too (worker/orphan-gossip.ts); absent: never. */
  peersOrphaned?(): boolean;
  /** Tell the peers, at each check, whether this process is orphaned (no parent, no hub link) and for how long. */
  announce?(orphaned: boolean, forMs: number): void;
}

/** How often the guard reads its signals by default: a tenth of the bound, between 1 s and 30 s. */
export function orphanCheckMs(afterMs: number): number { return Math.min(30_000, Math.max(1000, Math.floor(afterMs / 10))); }

export interface OrphanGuardOptions {
  /** Exit after this long with no parent, no hub and no peer that is not orphaned too; 0: never (worker config `client.orphanExitMs`). */
  afterMs: number;
  /** Called once, when the bound is reached, with why. */
  onOrphaned(why: string): void;
  /** True while the process that started this one is alive (default: `parentWatch()`). */
  parentAlive?: () => boolean;
  /** How often the signals are read (default: `orphanCheckMs`). */
  checkMs?: number;
  now?: () => number;
  /** A periodic timer; returns its stop (default: the process's shared clock). */
  every?: (ms: number, fn: () => void) => () => void;
}

/**
 * Bounds how long a worker outlives its swarm. A worker leaked by an interrupted test, or left when
 * its supervisor died and no hub came back, used to retry the dead hub forever (one ran 1.5 h). It
 * exits once, for `afterMs` without a break, the process that started it is gone (or a zombie), no
 * agent reaches a hub, and every live failover peer in another process (if any) says it is orphaned
 * too. A live parent, a hub link, or a peer that is not orphaned resets the clock: a worker started by
 * hand from a live shell waits for its hub as long as it takes, and members that see one peer with a
 * parent or a hub ride out a hub outage of any length (they finish the run and hand it back). Leaked
 * processes of one swarm that see each other no longer keep each other running.
 */
export class OrphanGuard {
  private since?: number;
  /** Since when this process itself has had no parent and no hub link (announced to the peers). */
  private orphanSince?: number;
  private stopTimer?: () => void;
  private fired = false;
  private readonly parentAlive: () => boolean;

  /** Construct it early: the parent is the one this process has now. */
  constructor(private readonly signals: OrphanSignals, private readonly opts: OrphanGuardOptions) {
    this.parentAlive = opts.parentAlive ?? parentWatch();
  }

  start(): void {
    if (this.opts.afterMs <= 0 || this.stopTimer) return;
    const checkMs = this.opts.checkMs ?? orphanCheckMs(this.opts.afterMs);
    this.stopTimer = (this.opts.every ?? every)(checkMs, () => this.check());
  }

  stop(): void { this.stopTimer?.(); this.stopTimer = undefined; }

  /** One reading of the signals (the timer's tick; tests call it directly). */
  check(): void {
    if (this.fired) return;
    const now = (this.opts.now ?? Date.now)();
    const alone = !this.parentAlive() && !this.signals.hubLinked();
    this.orphanSince = alone ? this.orphanSince ?? now : undefined;
    this.signals.announce?.(alone, alone ? now - this.orphanSince! : 0);
    const peers = alone && this.signals.peersLive();
    if (!alone || (peers && !this.signals.peersOrphaned?.())) { this.since = undefined; return; }
    this.since ??= now;
    if (now - this.since < this.opts.afterMs) return;
    this.fired = true;
    this.stop();
    const s = Math.round((now - this.since) / 1000);
    this.opts.onOrphaned(peers
      ? `its parent process is gone, it reached no hub, and every failover peer it saw in another process was orphaned too for ${s} s (bound ${this.opts.afterMs} ms, --orphan-exit-ms)`
      : `its parent process is gone and it reached no hub and saw no failover peer for ${s} s (bound ${this.opts.afterMs} ms, --orphan-exit-ms)`);
  }
}

/**
 * True while the process that started this one lives: same pid as our parent now, same start time
 * as then, not a zombie (/proc/PID/stat; the same reading as the engines' orphan watchdog). Started
 * by init (ppid 0 or 1: a container's or systemd's own process), there is nothing to outlive.
 * Without /proc, only whether the pid exists.
 */
export function parentWatch(): () => boolean {
  const self = stat('self');
  const ppid = self ? Number(self[1]) : process.ppid;
  if (ppid <= 1) return () => true;
  const born = stat(ppid)?.[19];
  if (!self || born === undefined) return () => { try { process.kill(ppid, 0); return true; } catch { return false; } };
  return () => {
    const now = stat('self');
    if (!now || Number(now[1]) !== ppid) return false;
    const p = stat(ppid);
    return !!p && p[19] === born && p[0] !== 'Z' && p[0] !== 'X';
  };
}

