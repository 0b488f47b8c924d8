import fs from 'node:fs';
import { SwarmError, every, randomId, type ErrorCode } from '../protocol/index.js';
import { StallClock } from '../sched/index.js';
import { Journal, type JournalOptions, type JournalRecord, type JournalStats, type SnapshotItem } from './journal.js';
import { Replay, applyFinal, snapshotRecords, type FinalRecord, type MetaRecord, type StoreState } from './store-replay.js';
import { ResultsArchive, type ArchiveStats } from './archive.js';
import { Evictor } from './archive-evict.js';
import type { ArchiveBound } from './archive-bound.js';
import { DEFAULT_RETAIN, firstPassDelay, hotCeiling, type RetainOptions } from './retention.js';
import { journalPaths, quarantine, type Damage } from './journal-files.js';
import { TaskQueue, type QueueOptions, type WorkerView } from './queue.js';
import { TASK_SPEC, TASK_SPEC_KEYS } from '#gen/task-check.js';
import { describe } from '../protocol/check.js';
import { StoreEvents, type StoreEvent } from './store-events.js';
import { isFinal, type TaskInput, type TaskRecord, type TaskResult, type TaskSpec } from './task.js';
export type { StoreEvent } from './store-events.js';

/** What of the queue others may read; every change goes through a TaskStore method. */
export type QueueView = Pick<TaskQueue, 'get' | 'has' | 'all' | 'counts' | 'pending' | 'nextReadyAt' | 'opts' | 'heldCount' | 'nextSeq'>;

/** After an open that replayed finished tasks, retention's first pass (and a compaction the open wants) waits this long. */
export const SETTLE_AFTER_OPEN_MS = 5000;

/** A result or failure whose journal write failed is run again after this long, not at once on a full disk. */
const RETRY_AFTER_JOURNAL_ERROR_MS = 1000;

/** Retention and stall settings (the queue's and the journal's have their own). */
export interface StoreOptions {
  /** The horizon for finished tasks (default DEFAULT_RETAIN). */
  retain?: RetainOptions;
  /** How often the horizon is applied, ms. */
  evictEveryMs?: number;
  /** After an open that replayed finished tasks, the first retention pass waits this long (default SETTLE_AFTER_OPEN_MS). */
  settleAfterOpenMs?: number;
  /** Rotate an archive file past this many bytes (default: from `archiveMax`, hub/archive-bound.ts). */
  archiveRotateBytes?: number;
  /** What of the results archive stays on disk (default: every file). */
  archiveMax?: ArchiveBound;
  /** How often the store looks at the clock for stalls, ms. */
  tickMs?: number;
}

/**
 * Damage found in the journal on open (the records themselves are in the quarantine file), and
 * `orphans`: intact results or failures whose task line was damaged, kept (and compacted) rather than
 * dropped; a resubmit of that id gets its recorded result.
 */
export interface DamageReport { records: number; quarantine?: string; samples: Omit<Damage, 'raw'>[]; orphans: number }

/**
 * Tasks and results, journaled. The store owns its invariants: each transition is one method that
 * writes its journal record (durable, see JournalOptions) before memory changes, so nothing is
 * queued, shown or announced that a crash could take back, and a failed write leaves no trace.
 * On open the journal is replayed: accepted tasks without a result are queued again, and every
 * result is recorded exactly once (by task id). Without a state directory it keeps memory only.
 */
export class TaskStore {
  readonly events = new StoreEvents();
  /** Damaged journal records set aside on open. */
  damage: DamageReport = { records: 0, samples: [], orphans: 0 };
  /** Journal records written before checksums (replayed, reported). */
  legacyRecords = 0;
  /** Meta records (e.g. runs) found in the journal on open, for other parts to resume from. */
  readonly meta: { kind: string; data: unknown }[] = [];
  /** Every meta record, kept for snapshots. */
  private readonly metas: MetaRecord[] = [];
  /** Final records whose task is unknown (its line was damaged): kept, never dropped at compaction. */
  private readonly orphans = new Map<string, FinalRecord>();
  /** Ids whose task or final record came from a line without a checksum (see JournalRecord). */
  private readonly unchecked = { task: new Set<string>(), final: new Set<string>() };
  /** Ids being journaled by a submit, so a concurrent submit of the same id is a duplicate. */
  private readonly accepting = new Map<string, Promise<unknown>>();
  private reserved = 0;
  /** Ids whose final record is being written: a second result for one is a duplicate. */
  private readonly finishing = new Set<string>();
  private holdUntil = 0;
  private readonly q: TaskQueue;
  /** Finished tasks past the horizon go to the archive. */
  private readonly evictor: Evictor;
  /** Leases lost because this process stalled use no attempt. */
  readonly stall = new StallClock();
  /** Stops the store's clocks. */
  private readonly timers: (() => void)[] = [];
  private readonly tickMs: number;

  private constructor(queue: TaskQueue, private journal: Journal | undefined, private readonly archive: ResultsArchive | undefined, private readonly opts: StoreOptions) {
    this.q = queue;
    this.tickMs = opts.tickMs ?? 1000;
    this.evictor = new Evictor(opts.retain ?? DEFAULT_RETAIN, {
      get: (id) => this.q.get(id),
      remove: (id) => this.q.remove(id),
      // With a state directory (an archive), the journal is set once it has been read back.
      append: archive ? (r) => this.journal!.append(r) : undefined,
      busy: (id) => this.finishing.has(id),
      evicted: (ids) => this.events.emit({ type: 'evicted', ids }),
    }, archive);
  }

  /**
   * Start the store's clocks: retention passes and the stall watch. `settleMs`: the first retention
   * pass (and `afterSettle`, a compaction the open wants) waits this long (a restarted hub serves its workers and clients first).
   */
  private start(settleMs = 0, afterSettle?: () => void): void {
    // On the process's clocks (protocol/shared-clock.ts): with the hub's tick, one wake-up a second.
    this.timers.push(every(this.tickMs, () => this.stall.tick(Date.now(), this.tickMs)));
    const passes = () => {
      afterSettle?.();
      return every(this.opts.evictEveryMs ?? 1000, () => { void this.evict().catch(() => { /* counted; the tasks stay hot and the next pass retries */ }); });
    };
    if (settleMs <= 0) { this.timers.push(passes()); return; }
    let stop: (() => void) | undefined;
    const t = setTimeout(() => { stop = passes(); }, settleMs);
    t.unref();
    this.timers.push(() => { clearTimeout(t); stop?.(); });
  }

  /** Submissions refused because the finished tasks held hot were past their ceiling (retention.ts `hotCeiling`). */
  private refusedBehind = 0;

  /**
   * New tasks wait while the archive pass is behind (retention.ts `hotCeiling`): the hot state
   * is the hub's memory, and finished tasks arriving faster than the pass writes them grew it without
   * bound. Thrown before anything is journaled, as a full queue's refusal.
   */
  private checkHotRoom(count: number): void {
    const r = this.evictor.retention;
    if (!r.behind) return;
    this.refusedBehind++;
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    // A pass that keeps failing (a full or unwritable results disk) is not catching up: say why, so
    // the operator frees the disk instead of waiting.
    const failing = this.evictor.lastError;
    const why = failing ? `archive writes are failing (${failing.slice(0, 300)}); new work is accepted again once they succeed` : 'while the archive catches up; retry shortly';
    throw new SwarmError('SWARM_ERR_QUEUE_FULL', `the finished tasks held hot (${mib(r.bytes)}) are past ${mib(hotCeiling(r.opts.bytes))}, the --retain bytes bound (${mib(r.opts.bytes)}) and a margin: ${count} new task(s) not accepted; ${why}`);
  }

  /** Read-only view of the queue. */
  get queue(): QueueView { return this.q; }

  static async open(stateDir: string | undefined, q: QueueOptions, j: JournalOptions, s: StoreOptions = {}): Promise<TaskStore> {
    const queue = new TaskQueue(q);
    if (!stateDir) {
      const mem = new TaskStore(queue, undefined, undefined, s);
      mem.start();
      return mem;
    }
    fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    let archive: ResultsArchive;
    try { archive = ResultsArchive.open(stateDir, s.archiveRotateBytes, s.archiveMax); } catch (e) {
      throw new SwarmError('SWARM_ERR_JOURNAL', `cannot open the results archive in ${stateDir}: ${(e as Error).message}`);
    }
    const store = new TaskStore(queue, undefined, archive, s);
    // Each record is applied as it is read: collected first, a hot state of 240 MB was held twice (the
    // parsed records beside the store), and the collector's work was a third of a restart's CPU.
    let opened: ReturnType<typeof Journal.open>;
    const replay = new Replay(store.state);
    try { opened = Journal.open(stateDir, j, (r) => replay.one(r), (l) => replay.lazy(l), (x) => replay.indexed(x)); } catch (e) { archive.close(); throw e; }
    const { journal, damage, legacy } = opened;
    const unreadable = replay.readyRestored();
    store.openFloor = replay.openFloor;
    if (unreadable.length) {
      damage.push(...unreadable);
      try { quarantine(journalPaths(stateDir).quarantine, unreadable); } catch { /* reported in the status and the log */ }
      journal.wantCompaction = true;
    }
    store.journal = journal;
    store.legacyRecords = legacy;
    store.damage = {
      records: damage.length,
      quarantine: damage.length ? `${stateDir}/journal.quarantine.ndjson` : undefined,
      samples: damage.slice(0, 10).map(({ file, offset, why }) => ({ file, offset, why })),
      orphans: 0,
    };
    // A damaged line may have been any task's: with damage, only ids this hub forgets itself are refused.
    if (damage.length) store.openFloor = 0;
    store.damage.orphans = store.orphans.size;
    // Before the horizon is loaded: tasks archived just before a crash leave the hot state, not archived again.
    await store.evictor.recover();
    store.evictor.load(queue.all());
    journal.setSnapshotSource(() => store.snapshot());
    // With history replayed, the first retention pass and a compaction the open asked for wait a
    // little: they ran beside the workers' rejoining and the first tasks (archive lines parsed and
    // written, a snapshot encoded, evictions sent to every replica holder).
    // Not after lives that missed their passes (killed every few seconds): then at once (retention.ts).
    const lastWritten = Math.max(replay.openFloor, store.evictor.retention.latest);
    const settle = firstPassDelay(store.evictor.retention, lastWritten, s.settleAfterOpenMs ?? SETTLE_AFTER_OPEN_MS);
    // In the background: the hub is ready meanwhile (appends go on while a compaction runs).
    let compactAfterSettle: (() => void) | undefined;
    if (journal.wantCompaction) {
      const compact = () => void journal.compact().catch(() => { /* retried when the segment grows */ });
      // Damage is compacted away at once (the quarantine file has it): a later open must not find it again.
      if (!settle || damage.length) compact();
      else compactAfterSettle = compact;
    }
    store.start(settle, compactAfterSettle);
    return store;
  }

  /** How many journal lines were set aside on open (damaged or torn). */
  get corruptLines(): number { return this.damage.records; }

  /** Journal counters (undefined without a state directory). */
  get journalStats(): JournalStats | undefined { return this.journal?.stats; }

  /**
   * The latest acceptance or eviction time the journal held at open. A task accepted before it is
   * in the journal (the hub writes in time order and loses at most a tail), so a task unknown here
   * that was accepted before it was evicted and forgotten. Frozen at open: a tail lost in a crash
   * was accepted after every record that survived, and tasks accepted since must not overtake it.
   */
  private openFloor = 0;

  /** Tasks this hub accepted at or before this time are known here, or were evicted and forgotten (handback-check.ts). */
  get acceptedFloor(): number { return Math.max(this.openFloor - 1, this.evictor.tombstones.forgottenAccepted); }

  /** The records that rebuild the current state (store-replay.ts), for the journal's snapshots. */
  *snapshot(): Iterable<SnapshotItem> { yield* snapshotRecords(this.state, this.acceptedFloor); }

  /** The collections replay rebuilds and a snapshot writes (the same objects as the fields). */
  private get state(): StoreState {
    return { q: this.q, evictor: this.evictor, orphans: this.orphans, unchecked: this.unchecked, meta: this.meta, metas: this.metas };
  }

  /** Subscribe to the typed event stream; returns the unsubscribe function. */
  subscribe(fn: (e: StoreEvent) => void): () => void { return this.events.subscribe(fn); }

  /** Subscribe to tasks becoming final (done or failed), after they are durable. */
  onChange(fn: (rec: TaskRecord) => void): () => void {
    return this.events.subscribe((e) => { if (e.type === 'done' || e.type === 'failed') fn(e.rec); });
  }

  /**
   * Validate one task (the check protocol/gen-validators.ts compiled from TaskSpecSchema: a batch of
   * 5,000 is the hub's largest piece of work on the way in), filling its defaults into `input`; the
   * error names its position in the batch.
   */
  static parse(input: unknown, index = 0): TaskSpec {
    // In place, as frames are: the defaults go into the object given (a copy first cost 5x the check).
    if (TASK_SPEC(input)) return input as TaskSpec;
    throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', `task ${index + 1}: ${describe(TASK_SPEC.errors, nearKey)}`);
  }

  /**
   * Accept tasks, all or none: validated, checked for room, journaled, and only then queued. A task
   * whose id is already known is not added again: it comes back with `duplicate: true` (its id is
   * an idempotency key). A failed journal write rejects the whole batch and queues nothing.
   * `whenBehind`: while the archive pass is behind (`checkHotRoom`) new tasks are refused, except
   * those a worker hands back (they ran already: refused, a worker's results would wait on the hot state).
   */
  async submitMany(inputs: readonly (TaskInput | unknown)[], o: { whenBehind?: 'refuse' | 'accept' } = {}): Promise<{ record: TaskRecord; duplicate: boolean }[]> {
    const specs = inputs.map((x, i) => TaskStore.parse(x, i));
    // Ids another submit is journaling right now: wait for it, then they are known (or free again).
    const racing = specs.flatMap((s) => (s.id !== undefined && this.accepting.has(s.id) ? [this.accepting.get(s.id)!] : []));
    if (racing.length) await Promise.allSettled(racing);
    const fresh = new Map<string, TaskSpec & { id: string }>();
    const ids = specs.map((s) => {
      const id = s.id ?? randomId();
      // Evicted but inside the duplicate window: a duplicate, answered from the archive.
      // The id first: replay reads it from its place in the line without parsing (journal-record.ts).
      if (!this.q.has(id) && !this.evictor.tombstones.has(id) && !fresh.has(id)) { const spec = { id, ...s }; spec.id = id; fresh.set(id, spec); }
      return id;
    });
    this.q.checkRoom(fresh.size + this.reserved);
    if (fresh.size && o.whenBehind !== 'accept') this.checkHotRoom(fresh.size);
    const now = Date.now();
    if (fresh.size && this.journal) {
      const write = this.journal.appendAll([...fresh.values()].map((spec): JournalRecord => ({ t: 'task', spec, at: now })));
      this.reserved += fresh.size;
      for (const id of fresh.keys()) this.accepting.set(id, write);
      try { await write; } finally {
        this.reserved -= fresh.size;
        for (const id of fresh.keys()) this.accepting.delete(id);
      }
    }
    const added = new Set<string>();
    for (const spec of fresh.values()) {
      const rec = this.q.add(spec, now);
      added.add(spec.id);
      this.events.emit({ type: 'accepted', rec });
      // Its result was recorded (and is in the journal) though its task line was damaged: it is done.
      const orphan = this.orphans.get(spec.id);
      if (orphan) {
        this.orphans.delete(spec.id);
        applyFinal(this.state, orphan);
        this.evictor.finished(rec);
        this.events.emit({ type: orphan.t === 'result' ? 'done' : 'failed', rec });
      }
    }
    // The first occurrence of an id added now is new; any other is a duplicate (a Set, not indexOf: 5,000 ids is 12.5M compares).
    return ids.map((id) => {
      const first = added.delete(id);
      return { record: this.q.get(id) ?? this.evictor.archived(id)!, duplicate: !first };
    });
  }

  /**
   * Lease the best ready task this worker may run. Nothing is leased for a moment after a journal
   * write failed: a result that cannot be recorded is not worth computing.
   */
  lease(w: WorkerView): TaskRecord | undefined {
    if (this.holdUntil > Date.now()) return undefined;
    const rec = this.q.next(w);
    if (rec) this.events.emit({ type: 'leased', rec });
    return rec;
  }

  /**
   * Lease a queued task to no one until it is unheld (a worker said it is handing back its result).
   * Not journaled: a restart starts with no holds. False if it is not queued.
   */
  awaitHandback(id: string): boolean { return this.q.hold(id); }
  /** That hold is over (the result came, or will not); true if the task is ready to lease again. */
  handbackEnded(id: string): boolean {
    const ok = this.q.unhold(id);
    if (ok) this.events.emit({ type: 'ready', rec: this.q.get(id)! });
    return ok;
  }

  /** The task `lease(w)` would take now, not leased (a worker like `w` may take it instead). */
  peek(w: WorkerView): TaskRecord | undefined { return this.holding ? undefined : this.q.peek(w); }

  /** True while leasing is held back after a journal write failed (the dispatcher tries again later). */
  get holding(): boolean { return this.holdUntil > Date.now(); }

  /**
   * Record a result once per task id; later results for the same task are duplicates. The result is
   * visible (state, /wait, events) only once durable. If the write fails the task goes back to the
   * queue (no attempt used) and this rejects with the journal's error.
   */
  async complete(id: string, result: TaskResult): Promise<'recorded' | 'duplicate' | 'unknown'> {
    const rec = this.q.get(id);
    if (!rec) return this.evictor.tombstones.has(id) ? 'duplicate' : 'unknown';
    if (isFinal(rec) || this.finishing.has(id)) return 'duplicate';
    this.finishing.add(id);
    // One finish time for the journal and memory: a replayed task reads as the one archived.
    const at = Date.now();
    try {
      await this.journal?.append({ t: 'result', id, text: result.text, worker: result.worker, attempt: result.attempt, receipt: result.receipt, at });
    } catch (err) {
      this.finishing.delete(id);
      this.writeFailed(rec);
      throw err;
    }
    this.finishing.delete(id);
    const outcome = this.q.complete(id, result, at);
    if (outcome === 'recorded') { this.evictor.finished(rec); this.events.emit({ type: 'done', rec }); }
    return outcome;
  }

  /**
   * A lease failed on a worker: retried with backoff, or failed for good (journaled first). A report
   * about a lease the worker no longer holds is ignored.
   */
  async fail(id: string, worker: string, error: { code: ErrorCode; msg: string }, retryable: boolean): Promise<'retry' | 'failed' | 'ignored'> {
    const rec = this.q.get(id);
    if (!rec || this.finishing.has(id)) return 'ignored';
    // Decided once, by sched: retry with backoff, or fail for good (journaled before memory changes).
    const v = this.q.verdict(id, worker, error, retryable);
    if (!v) return 'ignored';
    if (v.kind === 'retry') {
      this.q.retryAfter(id, error, v.delayMs);
      this.events.emit({ type: 'requeued', rec });
      return 'retry';
    }
    await this.finish(rec, v.error);
    return 'failed';
  }

  /**
   * A final failure decided while the hub was away (an acting coordinator's verdict, handed back):
   * recorded once per task id (journaled first), never over a result: 'duplicate' if the task is final.
   * `attempts`: those gossip mode used, which a restarted hub did not count.
   */
  async failHandedBack(id: string, error: { code: ErrorCode; msg: string }, attempts = 0): Promise<'recorded' | 'duplicate' | 'unknown'> {
    const rec = this.q.get(id);
    if (!rec) return this.evictor.tombstones.has(id) ? 'duplicate' : 'unknown';
    if (isFinal(rec) || this.finishing.has(id)) return 'duplicate';
    if (rec.state !== 'leased' && attempts > rec.attempts) rec.attempts = attempts;
    await this.finish(rec, error);
    return isFinal(rec) && rec.state === 'failed' ? 'recorded' : 'duplicate';
  }

  /** Cancel a task that has not finished: it fails with SWARM_ERR_CANCELLED (journaled first). False if already final or unknown. */
  async cancel(id: string, reason: string): Promise<boolean> {
    const rec = this.q.get(id);
    if (!rec || isFinal(rec) || this.finishing.has(id)) return false;
    await this.finish(rec, { code: 'SWARM_ERR_CANCELLED', msg: reason });
    return true;
  }

  /** Take back a lease the worker refused (its slots were full): no attempt is used up. */
  unlease(id: string, worker: string): boolean {
    const ok = this.q.unlease(id, worker);
    if (ok) this.events.emit({ type: 'requeued', rec: this.q.get(id)! });
    return ok;
  }

  /** Every lease of a worker that left goes back to the queue (no attempt used if the hub stalled). */
  release(worker: string): TaskRecord[] { return this.settle(this.q.release(worker, this.forgiven())); }

  /** Leases past their time go back to the queue (no attempt used if the hub stalled). */
  expireLeases(): TaskRecord[] { return this.settle(this.q.expireLeases(undefined, this.forgiven())); }

  /**
   * Whether leases lost now are the hub's own fault: a stall just ended. The clock is read here too,
   * not only on the tick: after a SIGSTOP, the sockets' closes run before the first timer does.
   */
  private forgiven(): ((rec: TaskRecord) => boolean) | undefined {
    const now = Date.now();
    this.stall.tick(now, this.tickMs);
    return this.stall.forgives(now) ? () => true : undefined;
  }

  /**
   * Tasks the queue took back; one leased too often failed there and then, and its record is
   * written now. (Requeues are not journaled: a lease is not durable state.)
   */
  private settle(back: TaskRecord[]): TaskRecord[] {
    for (const rec of back) {
      if (rec.state !== 'failed') { this.events.emit({ type: 'requeued', rec }); continue; }
      void this.journal?.append({ t: 'fail', id: rec.id, error: rec.error!, attempts: rec.attempts, at: Date.now() })
        .then(() => { this.evictor.finished(rec); this.events.emit({ type: 'failed', rec }); }, () => { /* replay queues it again: it runs once more */ });
      if (!this.journal) { this.evictor.finished(rec); this.events.emit({ type: 'failed', rec }); }
    }
    return back;
  }

  /** Journal a record for another part (a run's spec, say); resolves once durable. */
  async appendMeta(kind: string, data: unknown): Promise<void> {
    const at = Date.now();
    await this.journal?.append({ t: 'meta', kind, data, at });
    this.metas.push({ kind, data, at });
  }

  private async finish(rec: TaskRecord, error: { code: ErrorCode; msg: string }): Promise<void> {
    this.finishing.add(rec.id);
    try {
      await this.journal?.append({ t: 'fail', id: rec.id, error, attempts: rec.attempts, at: Date.now() });
    } catch (err) {
      this.finishing.delete(rec.id);
      if (error.code !== 'SWARM_ERR_CANCELLED') this.writeFailed(rec);
      throw err;
    }
    this.finishing.delete(rec.id);
    if (isFinal(rec)) return;
    this.q.markFailed(rec.id, error);
    this.evictor.finished(rec);
    this.events.emit({ type: 'failed', rec });
  }

  /** A final record could not be written: the task runs again later, and this attempt does not count. */
  private writeFailed(rec: TaskRecord): void {
    this.holdUntil = Date.now() + RETRY_AFTER_JOURNAL_ERROR_MS;
    if (rec.state === 'leased' && rec.worker && this.q.unlease(rec.id, rec.worker)) this.events.emit({ type: 'requeued', rec });
  }

  /** Compact now (tests and benches; the journal also compacts by size on its own). */
  async compact(): Promise<void> { await this.journal?.compact(); }

  /** Apply the retention horizon now (the store also does it every second); resolves with how many left. */
  evict(now = Date.now()): Promise<number> { return this.evictor.run(now); }

  /** A task by id: hot, or archived inside the duplicate window (read back from the archive). */
  lookup(id: string): TaskRecord | undefined { return this.q.get(id) ?? this.evictor.archived(id); }

  /** Where evicted task `id`'s archive line is (archive file number, byte offset), inside the duplicate window: read back in batches. */
  archivedAt(id: string): { file: number; offset: number } | undefined {
    const t = this.evictor.tombstones.get(id);
    return t && t.offset >= 0 && this.archive ? { file: t.file, offset: t.offset } : undefined;
  }

  /** True while `id` is remembered: hot, or evicted inside the duplicate window. */
  knows(id: string): boolean { return this.q.has(id) || this.evictor.tombstones.has(id); }

  /** Retention's part of the status: the horizon, what is hot, what left, the archive's files. */
  get retention(): { retain: Required<RetainOptions>; hot_finished: number; hot_bytes: number; evicted: number; remembered_ids: number; refused_behind: number; behind: boolean; ceiling_bytes: number; last_error?: string; archive?: ArchiveStats } {
    const e = this.evictor;
    return { retain: e.opts, hot_finished: e.retention.size, hot_bytes: e.retention.bytes, evicted: e.evictedTotal, refused_behind: this.refusedBehind, behind: e.retention.behind, ceiling_bytes: hotCeiling(e.opts.bytes), remembered_ids: e.tombstones.size, ...(e.lastError ? { last_error: e.lastError } : {}), ...(this.archive ? { archive: this.archive.stats } : {}) };
  }

  async close(): Promise<void> {
    for (const stop of this.timers) stop();
    await this.evictor.idle();
    await this.journal?.close();
    this.archive?.close();
  }
}

/** ` (did you mean "prompt"?)` for a task field one or two edits from a known one. */
function nearKey(k: string): string {
  const near = TASK_SPEC_KEYS.find((known) => editDistance(k, known) <= 2);
  return near ? ` (did you mean "${near}"?)` : '';
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}
