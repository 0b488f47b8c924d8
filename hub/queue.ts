import { SwarmError, type ErrorCode } from '../protocol/index.js';
import { Heap } from './heap.js';
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
}

/** What the queue needs to know of a worker to pick a task for it. */
export interface WorkerView { id: string; role?: string; caps: readonly string[] }

interface Entry { rec: TaskRecord; token: number }
/** Ready tasks that need the same role and capabilities. */
interface Bucket { role: string; caps: string[]; heap: Heap<Entry> }

const before = (a: Entry, b: Entry): boolean =>
  a.rec.spec.priority !== b.rec.spec.priority ? a.rec.spec.priority > b.rec.spec.priority : a.rec.seq < b.rec.seq;

/**
 * The hub's task queue: priorities (FIFO within one), leases with expiry, attempts and retry with
 * backoff, dispatch by role and capabilities. No I/O: the store journals around it.
 */
export class TaskQueue {
  private readonly records = new Map<string, TaskRecord>();
  private readonly buckets = new Map<string, Bucket>();
  private readonly delayed = new Heap<Entry>((a, b) => (a.rec.readyAt ?? 0) < (b.rec.readyAt ?? 0));
  private readonly leased = new Map<string, TaskRecord>();
  /** The live heap entry of each queued task; older entries are stale and skipped. */
  private readonly tokens = new Map<string, number>();
  private token = 0;
  private seq = 0;
  private readonly n = { queued: 0, leased: 0, done: 0, failed: 0 };
  private readonly clock: () => number;

  constructor(readonly opts: QueueOptions) { this.clock = opts.clock ?? Date.now; }

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

  /** Lease the best ready task this worker may run, or undefined. */
  next(w: WorkerView): TaskRecord | undefined {
    this.promote();
    let best: Bucket | undefined;
    let bestTop: Entry | undefined;
    for (const [key, b] of this.buckets) {
      if (b.role && b.role !== w.role) continue;
      if (b.caps.length && !b.caps.every((c) => w.caps.includes(c))) continue;
      const top = this.cleanTop(b);
      if (!top) { this.buckets.delete(key); continue; }
      if (!bestTop || before(top, bestTop)) { best = b; bestTop = top; }
    }
    if (!best || !bestTop) return undefined;
    best.heap.pop();
    return this.lease(bestTop.rec, w.id);
  }

  /** Record a result. The first result of a task wins; any later one is a duplicate. */
  complete(id: string, result: TaskResult): 'recorded' | 'duplicate' | 'unknown' {
    const rec = this.records.get(id);
    if (!rec) return 'unknown';
    if (isFinal(rec)) return 'duplicate';
    this.leave(rec);
    rec.state = TaskState.DONE;
    rec.result = result;
    rec.finishedAt = this.clock();
    this.n.done++;
    return 'recorded';
  }

  /**
   * A worker reports that its lease failed. Retryable failures go back with backoff until the task's
   * attempts run out; then it fails for good. A report about a lease the worker no longer holds is ignored.
   */
  fail(id: string, worker: string, error: { code: ErrorCode; msg: string }, retryable: boolean): 'retry' | 'failed' | 'ignored' {
    const rec = this.records.get(id);
    if (!rec || rec.state !== TaskState.LEASED || rec.worker !== worker) return 'ignored';
    rec.error = error;
    if (retryable && rec.attempts < this.maxAttempts(rec)) {
      const base = this.opts.backoffMs ?? 100;
      const delay = Math.min(30_000, base * 2 ** (rec.attempts - 1)) * (0.5 + Math.random() / 2);
      this.requeue(rec, this.clock() + delay);
      return 'retry';
    }
    this.finishFailed(rec, retryable ? { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: `failed ${rec.attempts} time(s); last: ${error.code}: ${error.msg}` } : error);
    return 'failed';
  }

  /** Mark a task failed without a lease (journal replay). */
  markFailed(id: string, error: { code: ErrorCode; msg: string }): void {
    const rec = this.records.get(id);
    if (rec && !isFinal(rec)) this.finishFailed(rec, error);
  }

  /** Take a lease back that the worker refused (its slots were full): no attempt is used up. */
  unlease(id: string, worker: string): boolean {
    const rec = this.records.get(id);
    if (!rec || rec.state !== TaskState.LEASED || rec.worker !== worker) return false;
    rec.attempts--;
    this.requeue(rec);
    return true;
  }

  /** Every lease of a worker that left goes back to the queue at once. */
  release(worker: string): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const rec of this.leased.values()) if (rec.worker === worker) out.push(rec);
    for (const rec of out) this.requeue(rec);
    return out;
  }

  /** Leases past their time go back to the queue. */
  expireLeases(now = this.clock()): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const rec of this.leased.values()) if ((rec.leaseUntil ?? Infinity) < now) out.push(rec);
    for (const rec of out) this.requeue(rec);
    return out;
  }

  /** When the earliest backed-off task becomes ready (epoch ms), if any. */
  nextReadyAt(): number | undefined {
    for (;;) {
      const top = this.delayed.peek();
      if (!top) return undefined;
      if (this.tokens.get(top.rec.id) === top.token && top.rec.state === TaskState.QUEUED) return top.rec.readyAt;
      this.delayed.pop();
    }
  }

  private maxAttempts(rec: TaskRecord): number { return rec.spec.max_attempts ?? this.opts.defaultMaxAttempts; }

  private lease(rec: TaskRecord, worker: string): TaskRecord {
    this.tokens.delete(rec.id);
    rec.state = TaskState.LEASED;
    rec.worker = worker;
    rec.attempts++;
    // A task with its own timeout gets at least that long, plus slack for the result to travel.
    rec.leaseUntil = this.clock() + Math.max(this.opts.leaseMs, rec.spec.timeout_ms ? rec.spec.timeout_ms + 30_000 : 0);
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
    // A task released again and again (its workers keep dying) must end some time.
    if (rec.attempts >= this.maxAttempts(rec) * 3) {
      this.finishFailed(rec, { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: `leased ${rec.attempts} times without a result` });
      return;
    }
    this.enqueue(rec);
  }

  private finishFailed(rec: TaskRecord, error: { code: ErrorCode; msg: string }): void {
    this.leave(rec);
    rec.state = TaskState.FAILED;
    rec.error = error;
    rec.finishedAt = this.clock();
    this.n.failed++;
  }

  /** Take a task out of its current (non-final) state's count. */
  private leave(rec: TaskRecord): void {
    if (rec.state === TaskState.LEASED) { this.leased.delete(rec.id); this.n.leased--; }
    else if (rec.state === TaskState.QUEUED) { this.tokens.delete(rec.id); this.n.queued--; }
  }

  private enqueue(rec: TaskRecord): void {
    const e: Entry = { rec, token: ++this.token };
    this.tokens.set(rec.id, e.token);
    if (rec.readyAt !== undefined && rec.readyAt > this.clock()) { this.delayed.push(e); return; }
    rec.readyAt = undefined;
    const role = rec.spec.role ?? '';
    const caps = rec.spec.caps?.length ? [...rec.spec.caps].sort() : [];
    const key = caps.length ? `${role}\u0000${caps.join('\u0000')}` : role;
    let b = this.buckets.get(key);
    if (!b) { b = { role, caps, heap: new Heap(before) }; this.buckets.set(key, b); }
    b.heap.push(e);
  }

  /** Move backed-off tasks whose time has come into the ready buckets. */
  private promote(): void {
    const now = this.clock();
    for (;;) {
      const top = this.delayed.peek();
      if (!top || (top.rec.readyAt ?? 0) > now) return;
      this.delayed.pop();
      if (this.tokens.get(top.rec.id) !== top.token || top.rec.state !== TaskState.QUEUED) continue;
      top.rec.readyAt = undefined;
      this.enqueue(top.rec);
    }
  }

  private cleanTop(b: Bucket): Entry | undefined {
    for (;;) {
      const top = b.heap.peek();
      if (!top) return undefined;
      if (this.tokens.get(top.rec.id) === top.token && top.rec.state === TaskState.QUEUED) return top;
      b.heap.pop();
    }
  }
}
