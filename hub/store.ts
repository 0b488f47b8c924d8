import path from 'node:path';
import fs from 'node:fs';
import { SwarmError, randomId, type ErrorCode } from '../protocol/index.js';
import { Journal, type JournalOptions, type JournalRecord } from './journal.js';
import { TaskQueue, type QueueOptions } from './queue.js';
import { TaskSpecSchema, type TaskInput, type TaskRecord, type TaskResult, type TaskSpec } from './task.js';

type Listener = (rec: TaskRecord) => void;

/**
 * Tasks and results, journaled: a task is accepted, and a result recorded, only once it is in the
 * journal. On open, the journal is replayed: accepted tasks without a result are queued again, and
 * every result is recorded exactly once (by task id). Without a state directory it keeps memory only.
 */
export class TaskStore {
  private readonly listeners = new Set<Listener>();
  /** How many unreadable journal lines were skipped on open. */
  corruptLines = 0;

  private constructor(readonly queue: TaskQueue, private readonly journal: Journal | undefined) {}

  static async open(stateDir: string | undefined, q: QueueOptions, j: JournalOptions): Promise<TaskStore> {
    const queue = new TaskQueue(q);
    if (!stateDir) return new TaskStore(queue, undefined);
    fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const { journal, records, corrupt } = Journal.open(path.join(stateDir, 'journal.ndjson'), j);
    const store = new TaskStore(queue, journal);
    store.corruptLines = corrupt;
    store.replay(records);
    return store;
  }

  /** Meta records (e.g. runs) found in the journal on open, for other parts to resume from. */
  readonly meta: { kind: string; data: unknown }[] = [];

  private replay(records: JournalRecord[]): void {
    for (const r of records) {
      if (r.t === 'task') { if (!this.queue.has(r.spec.id)) this.queue.add(r.spec, r.at); }
      else if (r.t === 'result') this.queue.complete(r.id, { text: r.text, worker: r.worker, attempt: r.attempt, receipt: r.receipt });
      else if (r.t === 'fail') this.queue.markFailed(r.id, r.error);
      else if (r.t === 'meta') this.meta.push({ kind: r.kind, data: r.data });
    }
  }

  /** Subscribe to tasks becoming final (done or failed), after they are journaled. */
  onChange(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Validate one task; the error names its position in the batch. */
  static parse(input: unknown, index = 0): TaskSpec {
    const r = TaskSpecSchema.safeParse(input);
    if (r.success) return r.data;
    const is = r.error.issues[0]!;
    throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', `task ${index + 1}: ${is.path.join('.') || '(root)'}: ${is.message}`);
  }

  /**
   * Accept tasks (all or none are validated and checked for room). A task whose id is already known
   * is not added again: it comes back with `duplicate: true` (its id is an idempotency key).
   */
  async submitMany(inputs: readonly (TaskInput | unknown)[]): Promise<{ record: TaskRecord; duplicate: boolean }[]> {
    const specs = inputs.map((x, i) => TaskStore.parse(x, i));
    const seen = new Set<string>();
    const fresh = specs.filter((s) => s.id === undefined || (!this.queue.has(s.id) && !seen.has(s.id) && seen.add(s.id)));
    this.queue.checkRoom(fresh.length);
    const now = Date.now();
    const out: { record: TaskRecord; duplicate: boolean }[] = [];
    const added: JournalRecord[] = [];
    for (const s of specs) {
      const id = s.id ?? randomId();
      const known = this.queue.get(id);
      if (known) { out.push({ record: known, duplicate: true }); continue; }
      const spec = { ...s, id };
      out.push({ record: this.queue.add(spec, now), duplicate: false });
      added.push({ t: 'task', spec, at: now });
    }
    if (added.length && this.journal) await this.journal.append(...added);
    return out;
  }

  /** Record a result once per task id; later results for the same task are duplicates. */
  async complete(id: string, result: TaskResult): Promise<'recorded' | 'duplicate' | 'unknown'> {
    const outcome = this.queue.complete(id, result);
    if (outcome !== 'recorded') return outcome;
    await this.journal?.append({ t: 'result', id, text: result.text, worker: result.worker, attempt: result.attempt, receipt: result.receipt, at: Date.now() });
    this.emit(id);
    return outcome;
  }

  /** A lease failed on a worker; retried with backoff, or failed for good (journaled). */
  async fail(id: string, worker: string, error: { code: ErrorCode; msg: string }, retryable: boolean): Promise<'retry' | 'failed' | 'ignored'> {
    const outcome = this.queue.fail(id, worker, error, retryable);
    if (outcome === 'failed') await this.failed(id);
    return outcome;
  }

  /** Journal and announce tasks the queue failed on its own (leased too often). */
  async failed(id: string): Promise<void> {
    const rec = this.queue.get(id);
    if (!rec || rec.state !== 'failed') return;
    await this.journal?.append({ t: 'fail', id, error: rec.error!, attempts: rec.attempts, at: Date.now() });
    this.emit(id);
  }

  /** Journal a record for another part (a run's spec, say); resolves once written. */
  async appendMeta(kind: string, data: unknown): Promise<void> {
    await this.journal?.append({ t: 'meta', kind, data, at: Date.now() });
  }

  private emit(id: string): void {
    const rec = this.queue.get(id);
    if (!rec) return;
    for (const fn of this.listeners) {
      try { fn(rec); } catch { /* a listener's bug must not stop the others */ }
    }
  }

  async close(): Promise<void> { await this.journal?.close(); }
}
