import { SwarmError, type ErrorCode } from '../protocol/index.js';
import { ReadySet, afterFailure, afterLeaseLost, lapsed, leaseUntil, maxAttemptsOf, type FailVerdict, type ReadyItem } from '../sched/index.js';
import { TaskState, isFinal, type TaskRecord, type TaskResult, type TaskSpec } from './task.js';

export interface QueueOptions {
  /** Most tasks waiting or running at once; more is SWARM_ERR_QUEUE_FULL. */
  maxDepth: number;
  /** A lease not answered in this long goes back to the queue. */
  leaseMs: number;
  defaultMaxAttempts: number;
  /** First retry waits this long, doubling per attempt (with jitter), capped at 30 s. */
  backoffMs?: number;
  clock?: () => number;
  /** Jitter source for backoff (tests pass a fixed one). */
  random?: () => number;
}

/** What the queue needs to know of a worker to pick a task for it. */
export interface WorkerView { id: string; role?: string; caps: readonly string[] }

/**
 * The hub's adapter over the scheduling core (sched/): task records by id, their leases and counts.
 * Which task runs next, retries, backoff and lease times are sched's rules. No I/O: the store
 * journals around it.
 */
export class TaskQueue {
  private readonly records = new Map<string, TaskRecord>();
  private readonly ready: ReadySet<TaskRecord>;
  private readonly leased = new Map<string, TaskRecord>();
  private seq = 0;
  /** Queued tasks kept out of the ready set, with how many holds each has (see `hold`). */
  private readonly held = new Map<string, number>();
  private readonly n = { queued: 0, leased: 0, done: 0, failed: 0 };
  private readonly clock: () => number;

  constructor(readonly opts: QueueOptions) {
    this.clock = opts.clock ?? Date.now;
    this.ready = new ReadySet(this.clock);
  }

  get(id: string): TaskRecord | undefined { return this.records.get(id); }
  has(id: string): boolean { return this.records.has(id); }
  all(): IterableIterator<TaskRecord> { return this.records.values(); }
  counts(): { queued: number; leased: number; done: number; failed: number } { return { ...this.n }; }
  /** Tasks waiting or running. */
  get pending(): number { return this.n.queued + this.n.leased; }

  /** Refuse a batch that would pass the depth bound (all or nothing). */
  checkRoom(count: number): void {
    if (this.pending + count > this.opts.maxDepth) {
      throw new SwarmError('SWARM_ERR_QUEUE_FULL', `queue holds ${this.pending} of at most ${this.opts.maxDepth} tasks; ${count} more do not fit`);
    }
  }

  /** Add a new task (the caller has checked the id is new). */
  add(spec: TaskSpec & { id: string }, submittedAt = this.clock()): TaskRecord {
    const rec: TaskRecord = { id: spec.id, spec, state: TaskState.QUEUED, attempts: 0, submittedAt, seq: this.seq++ };
    this.records.set(rec.id, rec);
    this.n.queued++;
    this.enqueue(rec);
    return rec;
  }

  /**
   * Replay: a task read back before its spec is parsed (hub/replayed.ts), queued but not yet in the
   * ready set (`makeReady` puts it there once its spec is read), in submission order as `add`.
   */
  restore(rec: TaskRecord): void {
    rec.seq = this.seq++;
    this.records.set(rec.id, rec);
    this.n.queued++;
  }

  /**
   * Replay: a restored task's result, its line kept unparsed by the record itself. `rec` is the
   * record the queue holds for its id (replay has just looked it up) and, restored, it is in neither
   * the ready set nor the leases (`makeReady` runs at replay's end): neither is looked up (two of a
   * result line's three lookups).
   */
  restoreDone(rec: TaskRecord, at: number): void {
    if (rec.state !== TaskState.QUEUED) return;
    this.n.queued--;
    rec.state = TaskState.DONE;
    rec.finishedAt = at;
    this.n.done++;
  }

  /** Replay's end: a restored task still queued joins the ready set, or (`drop`: its line did not parse) leaves. */
  makeReady(rec: TaskRecord, drop = false): void {
    if (rec.state !== TaskState.QUEUED || this.records.get(rec.id) !== rec) return;
    if (!drop) { this.enqueue(rec); return; }
    this.records.delete(rec.id);
    this.n.queued--;
  }

  /** The next task's submission order: every task added so far has a lower `seq`. */
  get nextSeq(): number { return this.seq; }

  /** Lease the best ready task this worker may run, or undefined. */
  next(w: WorkerView): TaskRecord | undefined {
    const item = this.ready.next(w);
    return item ? this.lease(item.value, w.id) : undefined;
  }

  /**
   * Keep a queued task from being leased until every hold on it is dropped (a worker is handing back
   * its result: leased meanwhile, it would run again). False if it is not queued (leased or final).
   */
  hold(id: string): boolean {
    const rec = this.records.get(id);
    const n = this.held.get(id);
    if (n !== undefined) { this.held.set(id, n + 1); return true; }
    if (!rec || rec.state !== TaskState.QUEUED) return false;
    this.ready.delete(id);
    this.held.set(id, 1);
    return true;
  }

  /** Drop one hold; the last one puts a task still queued back in the ready set. True if it is ready again. */
  unhold(id: string): boolean {
    const n = this.held.get(id);
    if (n === undefined) return false;
    if (n > 1) { this.held.set(id, n - 1); return false; }
    this.held.delete(id);
    const rec = this.records.get(id);
    if (!rec || rec.state !== TaskState.QUEUED) return false;
    this.enqueue(rec);
    return true;
  }

  /** Tasks held now. */
  get heldCount(): number { return this.held.size; }

  /** The task `next(w)` would lease now, not leased. */
  peek(w: WorkerView): TaskRecord | undefined { return this.ready.peek(w)?.value; }

  /** Record a result. The first result of a task wins; any later one is a duplicate. */
  complete(id: string, result: TaskResult, at = this.clock()): 'recorded' | 'duplicate' | 'unknown' {
    const rec = this.records.get(id);
    if (!rec) return 'unknown';
    if (isFinal(rec)) return 'duplicate';
    this.leave(rec);
    rec.state = TaskState.DONE;
    rec.result = result;
    rec.finishedAt = at;
    this.n.done++;
    return 'recorded';
  }

  /**
   * sched's verdict on a failed lease of `worker` (undefined: it does not hold the lease, the
   * report is ignored). Nothing changes: the store journals a final failure before `markFailed`,
   * or puts the task back with `retryAfter`.
   */
  verdict(id: string, worker: string, error: { code: ErrorCode; msg: string }, retryable: boolean): FailVerdict | undefined {
    const rec = this.records.get(id);
    if (!rec || rec.state !== TaskState.LEASED || rec.worker !== worker) return undefined;
    return afterFailure(rec.attempts, this.maxAttempts(rec), error, retryable, this.opts.random, this.opts.backoffMs);
  }

  /** A failed lease goes back to the queue, ready after `delayMs` (sched's retry verdict). */
  retryAfter(id: string, error: { code: ErrorCode; msg: string }, delayMs: number): void {
    const rec = this.records.get(id);
    if (!rec || rec.state !== TaskState.LEASED) return;
    rec.error = error;
    this.requeue(rec, this.clock() + delayMs);
  }

  /**
   * A worker reports that its lease failed: sched's verdict applied at once (memory only; the store
   * uses `verdict` so that a final failure is journaled first).
   */
  fail(id: string, worker: string, error: { code: ErrorCode; msg: string }, retryable: boolean): 'retry' | 'failed' | 'ignored' {
    const v = this.verdict(id, worker, error, retryable);
    if (!v) return 'ignored';
    if (v.kind === 'retry') { this.retryAfter(id, error, v.delayMs); return 'retry'; }
    this.finishFailed(this.records.get(id)!, v.error);
    return 'failed';
  }

  /** Mark a task failed without a lease (journal replay, or a verdict journaled). */
  markFailed(id: string, error: { code: ErrorCode; msg: string }, at?: number): void {
    const rec = this.records.get(id);
    if (rec && !isFinal(rec)) this.finishFailed(rec, error, at);
  }

  /** A finished task leaves the hot state (it is archived). False if it is unknown or not final. */
  remove(id: string): boolean {
    const rec = this.records.get(id);
    if (!rec || !isFinal(rec)) return false;
    this.records.delete(id);
    if (rec.state === TaskState.DONE) this.n.done--; else this.n.failed--;
    return true;
  }

  /** Take a lease back that the worker refused (its slots were full): no attempt is used up. */
  unlease(id: string, worker: string): boolean {
    const rec = this.records.get(id);
    if (!rec || rec.state !== TaskState.LEASED || rec.worker !== worker) return false;
    rec.attempts--;
    this.requeue(rec);
    return true;
  }

  /**
   * Every lease of a worker that left goes back to the queue at once. A lease `forgive` names was
   * lost to something else than its task (the hub stalled): it uses no attempt.
   */
  release(worker: string, forgive?: (rec: TaskRecord) => boolean): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const rec of this.leased.values()) if (rec.worker === worker) out.push(rec);
    for (const rec of out) this.lost(rec, forgive);
    return out;
  }

  /** Leases past their time go back to the queue (`forgive` as for release). */
  expireLeases(now = this.clock(), forgive?: (rec: TaskRecord) => boolean): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const rec of this.leased.values()) if (lapsed(rec.leaseUntil, now)) out.push(rec);
    for (const rec of out) this.lost(rec, forgive);
    return out;
  }

  private lost(rec: TaskRecord, forgive?: (rec: TaskRecord) => boolean): void {
    if (forgive?.(rec)) {
      rec.attempts--;
      if (rec.worker && !(rec.stallLost ??= []).includes(rec.worker)) rec.stallLost.push(rec.worker);
    }
    this.requeue(rec);
  }

  /** When the earliest backed-off task becomes ready (epoch ms), if any. */
  nextReadyAt(): number | undefined { return this.ready.nextReadyAt(); }

  private maxAttempts(rec: TaskRecord): number { return maxAttemptsOf(rec.spec, this.opts.defaultMaxAttempts); }

  private lease(rec: TaskRecord, worker: string): TaskRecord {
    rec.state = TaskState.LEASED;
    rec.readyAt = undefined;
    rec.worker = worker;
    rec.attempts++;
    rec.leaseUntil = leaseUntil(this.clock(), rec.spec.timeout_ms, this.opts.leaseMs);
    this.leased.set(rec.id, rec);
    this.n.queued--;
    this.n.leased++;
    return rec;
  }

  private requeue(rec: TaskRecord, readyAt?: number): void {
    this.leave(rec);
    rec.state = TaskState.QUEUED;
    rec.leaseUntil = undefined;
    rec.readyAt = readyAt;
    this.n.queued++;
    // A task released again and again (its workers keep dying) must end some time: sched says when.
    const v = afterLeaseLost(rec.attempts, this.maxAttempts(rec));
    if (v?.kind === 'failed') { this.finishFailed(rec, v.error); return; }
    this.enqueue(rec);
  }

  private finishFailed(rec: TaskRecord, error: { code: ErrorCode; msg: string }, at = this.clock()): void {
    this.leave(rec);
    rec.state = TaskState.FAILED;
    rec.error = error;
    rec.finishedAt = at;
    this.n.failed++;
  }

  /** Take a task out of its current (non-final) state's count. */
  private leave(rec: TaskRecord): void {
    if (rec.state === TaskState.LEASED) { this.leased.delete(rec.id); this.n.leased--; }
    else if (rec.state === TaskState.QUEUED) { this.ready.delete(rec.id); this.n.queued--; }
  }

  private enqueue(rec: TaskRecord): void {
    if (rec.readyAt !== undefined && rec.readyAt <= this.clock()) rec.readyAt = undefined;
    this.ready.add(itemOf(rec), rec.readyAt);
  }
}

function itemOf(rec: TaskRecord): ReadyItem<TaskRecord> {
  return { id: rec.id, rank: { priority: rec.spec.priority, seq: rec.seq, id: rec.id }, needs: rec.spec, value: rec };
}
