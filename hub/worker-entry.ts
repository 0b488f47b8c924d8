import { ENDS_SOON_CAP, PROMPT_CACHE_CAP, type Connection } from '../protocol/index.js';
import { Answer } from './answer.js';
import type { PendingRole } from './roles.js';

/**
 * One leased task on a worker: when, the TASK_REQ id (replies name it in `re`), the answer so far, and
 * when it started running as far as the hub can tell (at its lease with a slot free, else when a slot
 * freed for it); undefined while it waits in the worker's queue.
 */
export interface Lease { leasedAt: number; reqId: string; answer: Answer; startedAt?: number }

/** What a HANDSHAKE told the hub about a worker. */
export interface WorkerJoin {
  id: string; role: string; driver: string; caps: string[]; slots: number; conn: Connection; pid?: number; host?: string; session: string;
  /** HANDSHAKE `queue`: leases it holds queued beyond its slots. */
  queue?: number;
  /** Its queue is used while its recent tasks' mean run time is under this (ms; 0: never). */
  prefetchBelowMs?: number;
  /** Lease it one task ahead this long before its running one is expected to end (ms; 0: never). */
  leaseAheadMs?: number;
  /** HANDSHAKE `engine`: its engine's state when it joined. */
  engine?: 'starting' | 'ready' | 'failed';
  /** HANDSHAKE `failover_error`: it was started for failover and could not take part. */
  failoverError?: { code: string; msg: string };
}

/** Weight of the newest run time in the mean that decides prefetch (about the last ten tasks). */
const RUN_EWMA = 0.2;

/**
 * A connected worker as the hub sees it (the spec's section 6.1, plus slots and in-flight tasks).
 * It owns its status: `idle`/`busy` follow from its leases and `dead` from `left()`, so no caller
 * sets one. `state` is what the worker last reported about itself (its own state machine).
 */
export class WorkerEntry {
  readonly id: string;
  role: string;
  readonly driver: string;
  readonly caps: string[];
  /** Its engine keeps its last prompt (the prompt-cache cap): cache-aware dispatch considers it. */
  readonly keepsPrompts: boolean;
  readonly slots: number;
  /** Leases it may hold beyond its slots, queued in the worker, while its tasks are short. */
  readonly queue: number;
  readonly conn: Connection;
  readonly pid?: number;
  /** The host the worker reported (HANDSHAKE `host_id`): replica holders are spread over hosts. */
  readonly host?: string;
  /** Secret given in HANDSHAKE_ACK: a reconnect that presents it replaces this connection at once. */
  readonly session: string;
  readonly connectedAt: number;
  /** Why it runs without failover though started for it (HANDSHAKE `failover_error`), for status output. */
  readonly failoverError?: { code: string; msg: string };
  /** The worker's own state (HEARTBEAT `state`, the spec's 5.1), for status output only. */
  state = 'IDLE';
  lastSeen: number;
  load = 0;
  /** When a slot last became free (performance.now), for dispatch latency. */
  freedAt = performance.now();
  done = 0;
  /** Leased tasks by id. */
  readonly inflight = new Map<string, Lease>();
  /** ASSIGN_ROLE sent, no ACK yet: dispatch still uses `role`. */
  pendingRole?: PendingRole;
  /** The role plan gave `role` (so it may move it); false for a worker's own or an operator's choice. */
  roleFromPlan?: boolean;
  /** The worker answered ASSIGN_ROLE with ok:false: the plan leaves it alone. */
  roleRefused?: boolean;
  private gone = false;
  private readonly prefetchBelowMs: number;
  private readonly leaseAheadMs: number;
  /** Mean run time of its recent tasks (ms, from their receipts); undefined before the first. */
  private meanRunMs?: number;
  /** It gave a queued task back (a long task was ahead of it): slots only until it finishes one. */
  private queueRefused = false;
  /**
   * It says when a running task is about to end (cap `ends-soon`, HEARTBEAT `ending`): leased ahead
   * then, never by its mean run time, which missed a short task's end by more than the worker's hold
   * for most tasks under load (their leases ahead came back unstarted).
   */
  private readonly signalsEnd: boolean;
  /** When it last said a running task ends soon (performance.now); cleared as a lease ends. */
  private endingAt?: number;
  /**
   * Its queue places are being filled: set when its leases fall to half its queue beyond its slots,
   * cleared when they reach its capacity. Topped up on every answer, a worker whose answers arrive
   * one per read (few workers, tasks of a few ms) would get each task in its own write and wake once
   * per task. With 25 workers the dispatch pass already gathers several answers, so the submit bench
   * barely moves (workers' reads 1,245 -> 1,166 per 5,000 tasks).
   */
  private refill = true;

  constructor(j: WorkerJoin, now = Date.now()) {
    this.id = j.id; this.role = j.role; this.driver = j.driver; this.caps = j.caps; this.slots = j.slots;
    this.queue = j.queue ?? 0; this.prefetchBelowMs = j.prefetchBelowMs ?? 0;
    this.leaseAheadMs = j.leaseAheadMs ?? 0;
    this.keepsPrompts = j.caps.includes(PROMPT_CACHE_CAP);
    this.signalsEnd = this.leaseAheadMs > 0 && j.caps.includes(ENDS_SOON_CAP);
    this.conn = j.conn; this.pid = j.pid; this.host = j.host; this.session = j.session;
    this.connectedAt = now; this.lastSeen = now;
    this.engine = j.engine;
    this.failoverError = j.failoverError;
  }

  get status(): 'idle' | 'busy' | 'dead' { return this.gone ? 'dead' : this.inflight.size ? 'busy' : 'idle'; }
  /** A slot (or, while its tasks are short, a queue place) is free and the link takes more. */
  get canTake(): boolean {
    if (this.gone || !this.conn.writable) return false;
    const n = this.inflight.size;
    if (n < this.slots) return true;
    // The queue's refill rule is for short tasks; a lease ahead is one place, taken when due.
    return n < this.capacity && (this.refill || !this.short);
  }

  /** Its recent tasks are short: its queue is open to prefetch (unless it gave a queued task back). */
  private get short(): boolean {
    return !this.queueRefused && this.meanRunMs !== undefined && this.meanRunMs < this.prefetchBelowMs;
  }

  /**
   * Leases it may hold now: its slots, plus its queue while its recent tasks are short, or one place of
   * it once its running task is within `leaseAheadMs` of its expected end (aheadAt).
   */
  get capacity(): number {
    if (this.short) return this.slots + this.queue;
    const at = this.aheadAt();
    return at !== undefined && at <= performance.now() ? this.slots + 1 : this.slots;
  }

  /**
   * When (performance.now) it may be leased its next task ahead: when it said a running task ends soon
   * (signalsEnd), else `leaseAheadMs` before the first of its running tasks is expected to end (its
   * recent tasks' mean run time). Undefined when lease-ahead is
   * off, it has no queue, a queued task was given back (until it finishes one), its tasks are short
   * (the queue is theirs), or a slot is free or a task already waits in it.
   */
  aheadAt(): number | undefined {
    if (this.leaseAheadMs <= 0 || this.queue < 1 || this.queueRefused || this.short || this.inflight.size !== this.slots) return undefined;
    if (this.signalsEnd) return this.endingAt;
    if (this.meanRunMs === undefined) return undefined;
    let first = Infinity;
    for (const l of this.inflight.values()) {
      if (l.startedAt === undefined) return undefined;
      if (l.startedAt < first) first = l.startedAt;
    }
    return first + this.meanRunMs - this.leaseAheadMs;
  }

  /** It finished a task that ran `ms` (its receipt's duration). */
  ran(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.meanRunMs = this.meanRunMs === undefined ? ms : this.meanRunMs + RUN_EWMA * (ms - this.meanRunMs);
    this.queueRefused = false;
  }

  /** It said a running task ends soon (HEARTBEAT `ending`): true when that makes it due a lease ahead now. */
  ending(now = performance.now()): boolean {
    if (!this.signalsEnd || this.inflight.size !== this.slots) return false;
    this.endingAt = now;
    return this.aheadAt() !== undefined;
  }

  /** It gave back a task it could not start (SLOTS_FULL): lease it no more than its slots for now. */
  refusedQueued(): void { this.queueRefused = true; }

  /** A frame arrived from it. */
  heard(now = Date.now()): void { this.lastSeen = now; }
  /** Its engine as its HEARTBEAT reports it (undefined: a worker that does not say); `engineError` while `failed`. */
  engine?: 'starting' | 'ready' | 'failed';
  engineError?: string;
  /** What its engine runs instead of its first choice, and why (HEARTBEAT `engine_fallback`). */
  engineFallback?: string;
  /** Its HEARTBEAT. */
  beat(load: number, state?: string, engine?: 'starting' | 'ready' | 'failed', engineError?: string, engineFallback?: string): void {
    this.load = load;
    if (state !== undefined) this.state = state;
    if (engine !== undefined) { this.engine = engine; this.engineError = engine === 'failed' ? engineError ?? 'engine failed to start' : undefined; }
    this.engineFallback = engineFallback;
  }
  /** Ready to run tasks: its engine started (a worker that does not report its engine counts once joined). */
  get engineReady(): boolean { return this.engine === undefined || this.engine === 'ready'; }
  /** A task leased to it went out as TASK_REQ `reqId`. */
  leased(taskId: string, reqId: string, now = performance.now()): void {
    const startedAt = this.inflight.size < this.slots ? now : undefined;
    this.inflight.set(taskId, { leasedAt: now, reqId, answer: new Answer(), startedAt });
    if (this.inflight.size >= this.capacity) this.refill = false;
  }
  /** A lease ended (answered, failed, expired); true if it held it. */
  release(taskId: string, now = performance.now()): boolean {
    if (!this.inflight.delete(taskId)) return false;
    this.freedAt = now;
    // Whichever task it said was ending, a slot is free now or its queued task runs: the next word counts.
    this.endingAt = undefined;
    // A task waiting in its queue starts as a slot frees (the worker starts the oldest first).
    let running = 0;
    for (const l of this.inflight.values()) if (l.startedAt !== undefined) running++;
    if (running < this.slots) for (const l of this.inflight.values()) if (l.startedAt === undefined) { l.startedAt = now; break; }
    if (this.inflight.size <= this.slots + (this.queue >> 1)) this.refill = true;
    return true;
  }
  /** It left the hub (link closed, silent, replaced). */
  left(): void { this.gone = true; }

  /** The task it holds whose TASK_REQ had id `re`. */
  leaseByReq(re: unknown): string | undefined {
    if (typeof re !== 'string') return undefined;
    for (const [id, lease] of this.inflight) if (lease.reqId === re) return id;
    return undefined;
  }

  /**
   * The spec's own envelope has no `re`: a frame naming neither task nor request, from a worker that
   * holds exactly one task, is about that task (there is nothing else it could mean).
   */
  soleLease(re: unknown): string | undefined {
    return re === undefined && this.inflight.size === 1 ? this.inflight.keys().next().value : undefined;
  }
}
