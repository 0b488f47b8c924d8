import { WORKER_DEFAULTS, withDefaults } from '../config.js';
import type { Logger } from 'pino';
import { ReadySet, type ReadyItem } from '../../sched/ready.js';
import { afterFailure, afterLeaseLost, maxAttemptsOf } from '../../sched/retry.js';
import { STALL_AMNESTY_MS, StallClock, leaseUntil } from '../../sched/lease.js';
import type { ErrorCode } from '../../protocol/index.js';
import { canRun, needsOf, type Offers } from '../../sched/route.js';
import { realClock, type Clock, type TimerHandle } from './clock.js';
import type { Membership } from './membership.js';
import type { Entry, Replica, ReplicaSpec } from './replica.js';
import { recordFailure } from './handback.js';

/** An assignment from the acting coordinator to a member. */
export interface Assign { id: string; attempt: number; epoch: number; spec: ReplicaSpec }

/**
 * A member's answer to an assignment: `ak` it runs (or ran) it; `an` it hands it back: unrun (busy,
 * or fenced, with its fence), or `ran` and failed in a way worth another try elsewhere.
 */
export interface AssignReply { id: string; attempt: number; fence?: number; ran?: boolean; error?: { code: string; msg: string } }

/** A coordinator's claim: gossiped so members learn the current term and fence older ones. */
export interface Claim { epoch: number; id: string }

export interface CoordinatorOptions {
  clock?: Clock;
  log?: Logger;
  /** Task slots of a member (the worker default when unknown). */
  slotsOf?: (id: string) => number | undefined;
  /**
   * A member's role and caps, routed by the hub's rule (sched `canRun`); undefined for a member not
   * known yet (it gets only tasks that need nothing). Without this option every member runs anything.
   */
  offersOf?: (id: string) => Offers | undefined;
  /** Lease length when a spec has no longer timeout_ms (sched's default when absent); see `setRules`. */
  leaseMs?: number;
  /** Attempts of a task without its own max_attempts (sched's default when absent); see `setRules`. */
  defaultMaxAttempts?: number;
  /** Jitter for retry backoff. */
  random?: () => number;
  /** First retry waits about this long (sched's default when absent). */
  backoffMs?: number;
  dispatchIntervalMs?: number;
  /** After taking over, wait this long for anti-entropy to bring the freshest state before dispatching. */
  catchUpMs?: number;
  /** An assignment not acknowledged within this long is sent again (the link may have dropped it). */
  resendMs?: number;
  /** After this many unanswered sends the lease is handed back and the task goes to someone else. */
  maxSends?: number;
  /** A gap between ticks this much over the dispatch interval is this process stalling (see `ownFault`). */
  stallGapMs?: number;
  /** Called when this node starts or stops coordinating. */
  onRole?: (coordinating: boolean, epoch: number) => void;
}

export const ASSIGN_CH = 'as';
/** A member accepted an assignment (it runs it, ran it, or it is done). */
export const ACK_CH = 'ak';
/** A member handed an assignment back: busy, failed, or fenced (it knows a newer term). */
export const NACK_CH = 'an';

/**
 * The acting coordinator in gossip mode. Election is deterministic: the lowest id among the live
 * members in this node's view coordinates (no voting round; views converge by SWIM). A coordinator
 * takes a fencing epoch one above the highest it has seen; leases carry it, and members refuse
 * assignments from an older epoch. Two coordinators in a partition may both dispatch a task; its
 * result is still recorded once, because the replica keeps one winner per task id.
 */
export class Coordinator {
  private readonly clock: Clock;
  private active = false;
  private coordinating = false;
  private epoch = 0;
  private maxEpoch = 0;
  private readyAt = 0;
  private timer?: TimerHandle;
  private rr = 0;
  private kicked = false;
  private claimedAt = -Infinity;
  /** Assignments sent and not yet acknowledged, by task id. */
  private readonly unacked = new Map<string, { worker: string; attempt: number; at: number; sends: number }>();
  /**
   * Tasks backing off after a failed run: not leased before this time (clock ms). Kept by the term
   * that saw the failure only; a new coordinator may retry one sooner, which costs a run, not a result.
   */
  private readonly retryAt = new Map<string, number>();
  /** Open tasks whose lease this term took back without a verdict (see `runElsewhere`). */
  private readonly lostHere = new Set<string>();
  /** This process's own stalls: leases it takes back soon after one use no attempt (see `ownFault`). */
  private stall: StallClock;
  readonly stats = { assigned: 0, revoked: 0, failed: 0, terms: 0, renewed: 0, resent: 0, fenced: 0, forgiven: 0, stalls: 0 };

  /** The swarm's task rules: from the options, then from the hub (`setRules`). */
  private rules: { defaultMaxAttempts?: number; leaseMs?: number };
  /** Timings with defaults filled in (worker/config.ts). */
  private readonly cfg: typeof WORKER_DEFAULTS.coordinator;

  constructor(private readonly ms: Membership, private readonly replica: Replica, private readonly opts: CoordinatorOptions = {}) {
    this.clock = opts.clock ?? realClock;
    this.cfg = withDefaults(WORKER_DEFAULTS.coordinator, opts);
    this.rules = { defaultMaxAttempts: opts.defaultMaxAttempts, leaseMs: opts.leaseMs };
    this.stall = new StallClock(this.cfg.stallGapMs, STALL_AMNESTY_MS);
    ms.onBroadcast((v, _from, key) => key === 'coord' && this.onClaim(v));
    ms.onApp(ACK_CH, (from, body) => this.onAck(from, body as AssignReply));
    ms.onApp(NACK_CH, (from, body) => this.onNack(from, body as AssignReply));
    ms.onChange((e) => { if (e.state === 'dead' && this.coordinating) this.revokeDead(); if (this.active) this.evaluate(); });
    replica.onChange((e) => {
      if (e.lease && e.lease.epoch > this.maxEpoch) this.maxEpoch = e.lease.epoch;
      // A finished task frees a slot: dispatch soon rather than on the next tick (coalesced).
      if (e.result || e.failure) this.lostHere.delete(e.id);
      if ((e.result || e.failure) && this.coordinating && !this.kicked) {
        this.kicked = true;
        queueMicrotask(() => { this.kicked = false; this.dispatch(); });
      }
    });
  }

  /** The highest coordinator epoch seen (members fence assignments below it). */
  get fence(): number { return this.maxEpoch; }
  get isCoordinating(): boolean { return this.coordinating; }
  get currentEpoch(): number { return this.epoch; }
  /** Who coordinates in this node's view (when active). */
  get leader(): string | undefined { return this.active ? this.ms.live()[0] : undefined; }

  /** Gossip mode on: elect and, if it is us, dispatch. */
  activate(): void {
    if (this.active) return;
    this.active = true;
    // The stall clock starts with the ticks: star mode's silence is not a stall.
    this.stall = new StallClock(this.cfg.stallGapMs, STALL_AMNESTY_MS);
    this.stall.tick(this.clock.now(), this.cfg.dispatchIntervalMs);
    this.evaluate();
    const tick = () => {
      if (!this.active) return;
      this.timer = this.clock.setTimeout(tick, this.cfg.dispatchIntervalMs);
      this.ownFault(this.clock.now());
      this.evaluate();
      if (this.coordinating) this.dispatch();
    };
    this.timer = this.clock.setTimeout(tick, this.cfg.dispatchIntervalMs);
  }

  /** Gossip mode off (a hub coordinates again): step down. */
  deactivate(): void {
    this.active = false;
    this.clock.clearTimeout(this.timer);
    this.setCoordinating(false);
  }

  /**
   * The hub's task rules (its `--max-attempts` and lease length, sent with PEERS): an acting
   * coordinator must retry and lease as the hub would, or a failover changes what a task may cost.
   */
  setRules(r: { defaultMaxAttempts?: number; leaseMs?: number }): void {
    if (r.defaultMaxAttempts !== undefined) this.rules.defaultMaxAttempts = r.defaultMaxAttempts;
    if (r.leaseMs !== undefined) this.rules.leaseMs = r.leaseMs;
  }

  /** The rules in force (for status and tests). */
  get taskRules(): Readonly<{ defaultMaxAttempts?: number; leaseMs?: number }> { return this.rules; }

  /** Raise the fence (an epoch seen elsewhere, e.g. in an assignment). */
  observeEpoch(epoch: number): void { if (epoch > this.maxEpoch) this.maxEpoch = epoch; }

  private onClaim(v: unknown): boolean {
    const c = v as Partial<Claim> & { claim?: true };
    if (!c || c.claim !== true || typeof c.epoch !== 'number' || typeof c.id !== 'string') return false;
    const news = c.epoch > this.maxEpoch;
    this.observeEpoch(c.epoch);
    if (this.coordinating && c.id !== this.ms.id && c.epoch >= this.epoch) {
      // A rival term. The lowest live id keeps coordinating, under a fresh epoch above the rival's.
      if (this.ms.live()[0] === this.ms.id && (!this.ms.isLive(c.id) || c.id > this.ms.id)) this.claim();
      else this.setCoordinating(false);
    }
    return news;
  }

  private evaluate(): void {
    if (!this.active) return;
    const me = this.ms.live()[0] === this.ms.id;
    if (me && !this.coordinating) { this.setCoordinating(true); this.claim(); this.readyAt = this.clock.now() + this.cfg.catchUpMs; }
    else if (!me && this.coordinating) this.setCoordinating(false);
  }

  private claim(): void {
    this.claimedAt = this.clock.now();
    this.epoch = this.maxEpoch + 1;
    this.maxEpoch = this.epoch;
    this.stats.terms++;
    this.ms.broadcast('coord', { claim: true, epoch: this.epoch, id: this.ms.id });
    this.opts.log?.info({ epoch: this.epoch }, 'acting coordinator');
  }

  private setCoordinating(on: boolean): void {
    if (this.coordinating === on) return;
    this.coordinating = on;
    this.unacked.clear();
    this.retryAt.clear();
    this.lostHere.clear();
    this.opts.onRole?.(on, this.epoch);
  }

  private revokeDead(): void {
    const now = this.clock.now();
    for (const id of this.replica.openIds()) {
      const l = this.replica.get(id)?.lease;
      if (l && !l.revoked && !this.ms.isLive(l.worker)) this.lose(id, now);
    }
  }

  /**
   * Was a lease lost at `now` lost to this process's own stall? A coordinator stopped or starved for
   * seconds reads its members' acks and probes late: on waking, its suspicions and lease deadlines
   * fire before the messages that would have cleared them, and every member looks dead or silent at
   * once. Those leases are the stall's doing, as on the hub (sched's StallClock): for the amnesty
   * after a stall they use no attempt. The clock is read here too, since a member's death from a
   * membership timer can come before this coordinator's own tick after the stall.
   */
  private ownFault(now: number): boolean {
    if (this.stall.tick(now, this.cfg.dispatchIntervalMs)) {
      this.stats.stalls++;
      this.opts.log?.warn({ stallMs: this.stall.longestMs }, 'acting coordinator stalled: leases lost meanwhile use no attempt');
    }
    return this.stall.forgives(now);
  }

  /**
   * Take a lease back whose holder gave no verdict (it died, went silent, or the lease lapsed). It
   * counts as an attempt, bounded as on the hub (sched's `afterLeaseLost`: a task lost again and again
   * fails after RELEASE_FACTOR times its budget), unless this coordinator's own stall lost it, when it
   * is handed back as unrun. Its holder may still report a result: the replica records it.
   */
  private lose(id: string, now: number): boolean {
    const forgive = this.ownFault(now);
    if (!this.replica.revoke(id, forgive)) return false;
    this.stats.revoked++;
    if (forgive) this.stats.forgiven++;
    else this.lostHere.add(id);
    return true;
  }

  private onAck(from: string, r: AssignReply): void {
    const u = r && typeof r.id === 'string' ? this.unacked.get(r.id) : undefined;
    if (u && u.worker === from && u.attempt === r.attempt) this.unacked.delete(r.id);
  }

  /** A member handed an assignment back: free the lease; a fence above our term means a newer one exists. */
  private onNack(from: string, r: AssignReply): void {
    if (!r || typeof r.id !== 'string') return;
    if (typeof r.fence === 'number') { this.stats.fenced++; this.observeEpoch(r.fence); }
    if (!this.coordinating) return;
    const l = this.replica.get(r.id)?.lease;
    if (l && l.worker === from && l.attempt === r.attempt) {
      this.unacked.delete(r.id);
      if (this.replica.revoke(r.id, r.ran !== true)) this.stats.revoked++;
      // It ran and failed: sched's verdict, as the hub gives it, decides here: back off, or fail for good.
      if (r.ran === true) {
        const spec = this.replica.get(r.id)?.spec;
        const error = { code: (typeof r.error?.code === 'string' ? r.error.code : 'SWARM_ERR_TASK_FAILED') as ErrorCode, msg: typeof r.error?.msg === 'string' ? r.error.msg.slice(0, 4000) : 'failed on a member' };
        const v = afterFailure(l.attempt - (l.unrun ?? 0), maxAttemptsOf(spec ?? {}, this.rules.defaultMaxAttempts), error, true, this.opts.random, this.opts.backoffMs);
        if (v.kind === 'retry') this.retryAt.set(r.id, this.clock.now() + v.delayMs);
        else if (recordFailure(this.replica, r.id, { worker: this.ms.id, attempt: l.attempt, error: v.error })) this.stats.failed++;
      }
    }
  }

  private until(now: number, spec: ReplicaSpec | undefined): number { return leaseUntil(now, spec?.timeout_ms, this.rules.leaseMs); }

  private send(worker: string, id: string, attempt: number, spec: ReplicaSpec, now: number, sends = 1): void {
    this.unacked.set(id, { worker, attempt, at: now, sends });
    const a: Assign = { id, attempt, epoch: this.epoch, spec };
    this.ms.sendApp(worker, ASSIGN_CH, a);
  }

  /**
   * Assignments nobody acknowledged: send again, and after `maxSends` hand the lease back. Without
   * this, an assignment lost on a dropped link held its task until the lease lapsed (a minute or more).
   */
  private resend(now: number): void {
    const every = this.cfg.resendMs;
    for (const [id, u] of this.unacked) {
      const e = this.replica.get(id);
      const l = e?.lease;
      if (!e?.spec || !l || l.revoked || e.result || e.failure || l.worker !== u.worker || l.attempt !== u.attempt || l.epoch !== this.epoch) { this.unacked.delete(id); continue; }
      if (now - u.at < every) continue;
      if (u.sends >= this.cfg.maxSends) {
        this.unacked.delete(id);
        this.lose(id, now);
        continue;
      }
      this.stats.resent++;
      this.send(u.worker, id, u.attempt, e.spec, now, u.sends + 1);
    }
  }

  /**
   * One dispatch pass: revoke lapsed leases, then fill free slots as the hub does (sched's ReadySet:
   * priority then FIFO, routing by role and caps, backoff), one task per member per round, members
   * in a rotating order so work spreads evenly.
   */
  dispatch(): void {
    if (!this.coordinating || this.clock.now() < this.readyAt) return;
    const now = this.clock.now();
    // A term above ours exists (a lease or a member's fence said so; its claim never reached us, e.g.
    // from a member that was cut off): members fence our assignments, so claim above it (at most once a second).
    if (this.maxEpoch > this.epoch && now - this.claimedAt >= 1000 && this.ms.live()[0] === this.ms.id) this.claim();
    this.resend(now);
    const live = this.ms.live();
    const load = new Map(live.map((id) => [id, 0]));
    const ready = new ReadySet<Entry>(() => now);
    const queue = (e: Entry) => ready.add(itemOf(e), this.retryAt.get(e.id));
    // Only tasks not final yet: a pass costs O(open tasks), however long the run's history.
    for (const e of this.replica.openEntries()) {
      const l = e.lease;
      if (l && !l.revoked) {
        if (!load.has(l.worker) || now > l.until) { if (this.lose(e.id, now) && e.spec) queue(this.replica.get(e.id)!); }
        else {
          load.set(l.worker, load.get(l.worker)! + 1);
          // Inherited from the hub or an earlier term: renew it under ours and tell the holder, who
          // acknowledges if it runs the task and runs it if not (it may never have got it).
          if (l.epoch < this.epoch && e.spec && this.replica.renew(e.id, this.epoch, this.until(now, e.spec))) {
            this.stats.renewed++;
            this.send(l.worker, e.id, l.attempt, e.spec, now);
          }
        }
      } else if (e.spec) queue(e);
    }
    const n = live.length;
    for (let progress = true; progress && ready.size > 0;) {
      progress = false;
      for (let i = 0; i < n; i++) {
        const worker = live[(this.rr + i) % n]!;
        if (load.get(worker)! >= (this.opts.slotsOf?.(worker) ?? WORKER_DEFAULTS.agent.slots)) continue;
        const offers = this.offers(worker);
        const held: ReadyItem<Entry>[] = [];
        for (let item = ready.next(offers); item; item = ready.next(offers)) {
          if (worker === this.ms.id && this.runElsewhere(item, live)) { held.push(item); continue; }
          if (this.assign(item.value, worker, now)) { load.set(worker, load.get(worker)! + 1); progress = true; break; }
        }
        for (const h of held) ready.add(h);
      }
    }
    if (n) this.rr = (this.rr + 1) % n;
  }

  private offers(worker: string): Offers | 'any' { return this.opts.offersOf ? (this.opts.offersOf(worker) ?? { caps: [] }) : 'any'; }

  /**
   * Should the coordinator leave this task to another member? One whose lease this term took back
   * without a verdict (its member may have died running it) goes to another member that can run it: a
   * task that kills its worker must not take the coordinator with it, and with the coordinator the
   * record of its leases not yet spread (each new coordinator then counted from an older lease, and
   * such a task killed every worker process in turn).
   */
  private runElsewhere(item: ReadyItem<Entry>, live: readonly string[]): boolean {
    if (!this.lostHere.has(item.id)) return false;
    return live.some((w) => { if (w === this.ms.id) return false; const o = this.offers(w); return o === 'any' || canRun(o, item.needs); });
  }

  /**
   * Lease one task to `worker` and send it; false if it could not be (a lost race, or it was lost too
   * often). A failed run was judged when its member reported it (`onNack`); what is left to judge
   * here is leases lost without a verdict, by sched's rule for them. Leases handed back unrun (busy,
   * fenced, lost to this coordinator's stall) are not attempts.
   */
  private assign(e: Entry, worker: string, now: number): boolean {
    const attempt = (e.lease?.attempt ?? 0) + 1;
    const lost = afterLeaseLost(attempt - 1 - (e.lease?.unrun ?? 0), maxAttemptsOf(e.spec!, this.rules.defaultMaxAttempts));
    if (lost?.kind === 'failed') {
      if (recordFailure(this.replica, e.id, { worker: this.ms.id, attempt: attempt - 1, error: lost.error })) this.stats.failed++;
      return false;
    }
    const d = this.replica.lease(e.id, worker, this.epoch, this.until(now, e.spec));
    if (!d) return false;
    this.retryAt.delete(e.id);
    this.stats.assigned++;
    this.send(worker, e.id, d.lease!.attempt, e.spec!, now);
    return true;
  }
}

function itemOf(e: Entry): ReadyItem<Entry> {
  const spec = e.spec!;
  return { id: e.id, rank: { priority: typeof spec.priority === 'number' ? spec.priority : 0, seq: e.seq, id: e.id }, needs: needsOf(spec), value: e };
}
