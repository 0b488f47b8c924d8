import { ResultsArchive, damagedArchived, fromArchived, prunedArchived, unreadableArchived, toArchived, type ArchivedTask } from './archive.js';
import { readArchiveAfter, type ArchivePlace } from './archive-read.js';
import type { JournalRecord } from './journal-record.js';
import type { LazyEvict } from './journal-evict.js';
import { Retention, fullRetain, type RetainOptions } from './retention.js';
import { taskBytes } from './retention-bytes.js';
import { Tombstones } from './dup-window.js';
import { isFinal, type TaskRecord } from './task.js';

/** What eviction needs of the store: its records, its journal, and its event stream. */
export interface EvictHost {
  get(id: string): TaskRecord | undefined;
  /** Remove a final task from memory. */
  remove(id: string): boolean;
  /** Journal a record; resolves once durable (none without a state directory). */
  append?(rec: JournalRecord): Promise<void>;
  /** True while a final record for this id is being written. */
  busy(id: string): boolean;
  /** Tasks left the hot state (emitted as the store's `evicted` event). */
  evicted(ids: string[]): void;
}

/** Where a batch's archive lines went (offsets -1 without an archive), and the file's length after. */
type Written = { file: number; offsets: number[]; end?: number };

/**
 * At most this many tasks, and this many bytes of them, leave per archive write (one fsync, one evict
 * record): a write's cost is mostly its two fsyncs and the loop's turns around them, whatever its
 * size (0.2-3 s each under the soak's load on 2 shared cores), so the bytes a write takes bound how
 * fast finished tasks leave. At 2 MiB a write they left at about 1.4 MB/s while the soak finished 4.5
 * MB/s of them: the hot state passed its 64 MiB bound fivefold in 100 s and the hub was OOM-killed at
 * its 640 MiB limit (docs/journal.md, "The bytes bound").
 */
const BATCH = 5000;
const BATCH_BYTES = 16 * 1024 * 1024;
/**
 * A write's lines are encoded a turn of the hub's loop at a time, at most this many tasks and
 * characters a turn: 306 ms for 5,000 tasks of 3,200-byte texts in one turn, 57 ms for 1,000 (59 and
 * 9 ms with 200-byte texts), the longest turn of a loaded hub before.
 */
const ENCODE_TURN = { items: 1000, chars: 2 * 1024 * 1024 };
/** Batches per pass: a pass holds no lock, but stays short beside the hub's other work. */
const ROUNDS = 40;

/**
 * Moves finished tasks past the retention horizon out of the hot state: archive line (fsynced),
 * then the journal's evict record (durable), then memory and the `evicted` event. A crash between
 * the two writes, or a record the journal refuses, leaves archived tasks hot with their lines past
 * the last place an evict record covers: `settle` (at open and before each pass writes) records
 * them where they are, so no task is archived twice. A failed archive write (a full disk) leaves
 * them hot, so nothing acknowledged is lost.
 */
export class Evictor {
  readonly retention: Retention;
  readonly tombstones: Tombstones;
  /** Tasks evicted since the hub started. */
  evictedTotal = 0;
  lastError?: string;
  private running?: Promise<number>;
  /** The archive's end as the journal knows it: lines past it were written without an evict record. */
  private mark?: ArchivePlace;

  /** The horizon, every part given. */
  readonly opts: Required<RetainOptions>;

  constructor(opts: RetainOptions, private readonly host: EvictHost, private readonly archive?: ResultsArchive) {
    this.opts = fullRetain(opts);
    this.retention = new Retention(this.opts);
    this.tombstones = new Tombstones(this.opts);
  }

  /** A task became final (after its record is durable). */
  finished(rec: TaskRecord): void { this.retention.finished(rec.id, rec.finishedAt ?? Date.now(), taskBytes(rec)); }

  /** After replay: the finished tasks still hot, in the order they finished, with their bytes. */
  load(all: Iterable<TaskRecord>): void {
    const ids: string[] = [], ats: number[] = [], bytes: number[] = [];
    for (const r of all) if (isFinal(r)) { ids.push(r.id); ats.push(r.finishedAt ?? 0); bytes.push(taskBytes(r)); }
    this.retention.load(ids, ats, bytes);
  }

  /**
   * Replay one evict record. `hot`: false while nothing is hot yet (a snapshot's evict records come
   * before its tasks), so that no id is looked up for a task to drop.
   */
  replay(r: Extract<JournalRecord, { t: 'evict' }>, hot = true): void {
    // The last covered end written is the one that holds (records are replayed in the order they
    // were written): the largest ever seen outlived a newest file cut outside the hub, and recovery
    // then looked for unrecorded lines past an end the file no longer reached. An end too early only
    // makes recovery read more (it matches hot tasks only).
    if (r.end !== undefined) this.mark = { file: r.file, end: r.end };
    const { ids, offsets, file, at } = r;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (hot) {
        const rec = this.host.get(id);
        if (rec && isFinal(rec)) this.host.remove(id);
      }
      this.tombstones.put(id, file, offsets[i] ?? -1, at);
    }
  }

  /** `replay` for an evict record read back unparsed (journal-evict.ts): ids go to the window from the line's bytes. */
  replayLazy(r: LazyEvict, hot = true): void {
    if (r.end !== undefined) this.mark = { file: r.file, end: r.end };
    const { buf, idStart, idEnd, offsets, file, at } = r;
    for (let i = 0; i < r.count; i++) {
      if (hot) {
        const id = buf.toString('utf8', idStart[i]!, idEnd[i]!);
        const rec = this.host.get(id);
        if (rec && isFinal(rec)) this.host.remove(id);
      }
      this.tombstones.putBytes(buf, idStart[i]!, idEnd[i]!, file, offsets[i]!, at);
    }
  }

  /** The tombstones as evict records, for the snapshot (replayed before the tasks). */
  *snapshot(floor = 0): Iterable<JournalRecord> {
    for (const g of this.tombstones.groups()) yield { t: 'evict', ids: g.ids, file: g.file, offsets: g.offsets, at: g.at };
    // The archive's covered end outlives the tombstones (they leave after the window), and so does
    // the acceptance floor they leave behind (TaskStore.acceptedFloor).
    if (this.mark) yield { t: 'evict', ids: [], file: this.mark.file, offsets: [], at: Date.now(), end: this.mark.end, ...(floor ? { floor } : {}) };
  }

  private advance(p: ArchivePlace): void {
    if (!this.mark || before(this.mark, p)) this.mark = p;
  }

  /**
   * At open, after replay: the newest archive file checked against the covered end the journal
   * names, then the lines past that end recorded (`settle`: the hub died between an archive write and
   * its evict record, or the journal refused the record and the hub stopped before a pass recorded
   * it). If the journal refuses their record now too (its disk still full), the hub starts all the
   * same, the tasks hot (failing the open kept it down until space freed), and the first pass
   * records them by the same path. Resolves with how many tasks left the hot state.
   */
  async recover(now = Date.now()): Promise<number> {
    if (!this.archive) return 0;
    const end = this.archive.position;
    const m = this.mark;
    if (m && before(end, m)) {
      // The newest file is shorter than the journal's evict records say (cut outside the hub): what
      // was past the cut answers SWARM_ERR_RESULT_PRUNED, and lines written from here on are looked
      // for from the real end, not past the old one.
      this.archive.damage(m.file, `shorter than the journal says: ${end.file === m.file ? `${end.end} of ${m.end} bytes` : 'gone, an older file is the newest'} (cut outside the hub): the tasks whose lines were past the cut answer SWARM_ERR_RESULT_PRUNED`);
      this.mark = end;
      // Journaled, so the next start reads from here too (and does not say it again); if the journal
      // cannot take it now, the next evict record carries the end all the same.
      try { await this.host.append?.({ t: 'evict', ids: [], file: end.file, offsets: [], at: now, end: end.end }); } catch { /* said in the journal's status */ }
    }
    try { return await this.settle(now); } catch (e) {
      // Still owed: the first pass records them before it writes anything.
      this.lastError = (e as Error).message;
      return 0;
    }
  }

  /**
   * Lines past the covered end that `settle` read and has not recorded yet (their tasks still hot):
   * where each is, and its task's submission time (matched again before the record is written).
   */
  private readonly owed = new Map<string, { file: number; offset: number; submitted: number }>();
  /** How far the archive has been read into `owed` (undefined: from the covered end). */
  private scanned?: ArchivePlace;

  /**
   * Archive lines past the covered end (`mark`) were written and fsynced but no evict record says
   * so: the hub died between the two writes, or the journal refused the record (the state dir's disk
   * full after the archive took the last of it). Their tasks are still hot. One path records them,
   * at open (`recover`) and at the start of every pass, before anything new is written: the archive
   * read from the covered end to its good length (`position`, never bytes a failed write left past
   * it), the lines of tasks still hot with the same submission time (a task resubmitted after its
   * window is a newer run, and stays) recorded where they are, and those tasks out of the hot state
   * wherever they stand in the retention order (a clock stepped back makes them not due yet; their
   * lines are there all the same). Each line is written once: nothing new is written while any is
   * owed, so a pass leaves one batch unrecorded at most. What was read is kept until recorded, so a
   * journal that keeps refusing costs one read of the batch, not one a pass.
   *
   * The duplicate window counts from now, when the tasks leave the hot state (the evict record's and
   * the tombstone's `at`), not from when their lines were written (the line's `evicted_at`): a batch
   * recorded a window late was forgotten by the next pass, and its tasks answered unknown while the
   * archive held them.
   *
   * Throws as the journal does, what is not recorded still owed; resolves with how many left.
   */
  private async settle(now: number): Promise<number> {
    const archive = this.archive!;
    const end = archive.position;
    const from = this.scanned ?? this.mark;
    if (!from || before(from, end)) {
      // Lines past the covered end that are not archive lines (garbage written into the file): left
      // in place, skipped by every reader, and said (once: what was read is not read again).
      const damaged = new Map<number, { lines: number; first: number }>();
      readArchiveAfter(archive.dir, from, (a, file, offset) => {
        if (!before({ file, end: offset }, end) || this.owed.has(a.id) || !this.stillHot(a.id, a.submitted_at)) return;
        this.owed.set(a.id, { file, offset, submitted: a.submitted_at });
      }, (file, offset) => {
        if (!before({ file, end: offset }, end)) return;
        const d = damaged.get(file);
        if (d) d.lines++; else damaged.set(file, { lines: 1, first: offset });
      });
      for (const [file, d] of damaged) archive.damage(file, `${d.lines} damaged line${d.lines > 1 ? 's' : ''} from byte ${d.first} on, past what the journal covers (written outside the hub): skipped, nothing archived there is lost`);
      this.scanned = end;
    }
    for (const [id, o] of this.owed) if (!this.stillHot(id, o.submitted)) this.owed.delete(id);
    let total = 0;
    if (this.owed.size) {
      // Durable before the journal points at them: lines a failed write left behind (its cut-back
      // failed too) are taken as written at the next open, and were never fsynced.
      await archive.sync();
      const byFile = new Map<number, { ids: string[]; offsets: number[] }>();
      for (const [id, o] of this.owed) {
        const g = byFile.get(o.file) ?? byFile.set(o.file, { ids: [], offsets: [] }).get(o.file)!;
        g.ids.push(id);
        g.offsets.push(o.offset);
      }
      for (const [file, g] of byFile) {
        const loc: Written = { file, offsets: g.offsets, ...(file === end.file ? { end: end.end } : {}) };
        const recs = g.ids.map((id) => this.host.get(id)!);
        await this.record(g.ids, recs, loc, now);
        for (const id of g.ids) this.owed.delete(id);
        this.retention.forget(g.ids);
        total += this.left(recs, loc, now);
      }
    }
    // The covered end moves past what was read once all of it is recorded (a snapshot writes it).
    this.advance(end);
    this.scanned = undefined;
    return total;
  }

  /** Task `id` is still hot, finished, and the same submission as its archived line (not resubmitted since). */
  private stillHot(id: string, submittedAt: number): boolean {
    const rec = this.host.get(id);
    return !!rec && isFinal(rec) && rec.submittedAt === submittedAt;
  }

  /** An evicted task inside the duplicate window, as archived (a pread), or undefined. */
  archived(id: string): TaskRecord | undefined {
    const t = this.tombstones.get(id);
    if (!t) return undefined;
    let a: ArchivedTask | undefined;
    let ioError = false;
    try { a = t.offset >= 0 ? this.archive?.read(t.file, t.offset) : undefined; } catch { ioError = true; }
    if (a && a.id === id) return fromArchived(a);
    // Its file pruned by the bound (or removed by hand): failed, SWARM_ERR_RESULT_PRUNED.
    if (t.offset >= 0 && this.archive?.gone(t.file)) return prunedArchived(id, t.at);
    // Its file is there and its line is not (cut, or written over outside the hub): the same, said so.
    if (!ioError && t.offset >= 0 && this.archive) return damagedArchived(id, t, t.at);
    // Unreadable now (an I/O error) or never kept (a memory-only store): still a duplicate, shown without its result.
    return unreadableArchived(id, t.at);
  }

  /** Evict what is past the horizon now; resolves with how many left. One pass at a time. */
  run(now = Date.now()): Promise<number> {
    this.running ??= this.pass(now).finally(() => { this.running = undefined; });
    return this.running;
  }

  /** Wait for a pass under way (close). */
  async idle(): Promise<void> { await this.running?.catch(() => {}); }

  /**
   * Tasks the next write takes: halved after a write the disk had no room for, doubled back after
   * one that went. The whole backlog in one write (all or nothing) never fitted a disk with some room
   * left, so nothing drained and the hot state grew past the horizon until the disk was emptied.
   */
  private batch = BATCH;

  private async pass(now: number): Promise<number> {
    this.tombstones.prune(now);
    // The archive's age bound applies with no new line too (its byte bound after each append).
    this.archive?.prune(now);
    // Lines written whose evict record is owed are recorded first, whatever is due now; a journal
    // that still refuses throws here, before any new line is written.
    let total = this.archive ? await this.settle(now) : 0;
    for (let round = 0; round < ROUNDS; round++) {
      const asked = this.batch;
      const ids = this.retention.due(now, asked);
      if (!ids.length) break;
      // A task whose final record is still being written is not evicted before it is durable.
      const n = ids.findIndex((id) => this.host.busy(id));
      let take = n < 0 ? ids : ids.slice(0, n);
      if (!take.length) break;
      // No more than the archive file has room for (its bound holds on disk), nor a batch's bytes; one task at least.
      const fit = this.fitting(take);
      const cut = fit < take.length;
      if (cut) take = take.slice(0, fit);
      const recs = take.map((id) => this.host.get(id)).filter((r): r is TaskRecord => !!r && isFinal(r));
      let loc: Written = { file: 0, offsets: recs.map(() => -1) };
      try {
        if (this.archive) loc = await this.archive.append(recs.map((r) => toArchived(r, now)), ENCODE_TURN);
      } catch (e) { this.failed(e, take.length); }
      // Refused, its lines are past the covered end: the next pass's `settle` records them.
      await this.record(take, recs, loc, now);
      this.retention.drop(take.length);
      total += this.left(recs, loc, now);
      if (take.length < asked && !cut) break;
    }
    return total;
  }

  /** Journal the evict record for lines written at `loc` (throws as the journal does, counted in lastError). */
  private async record(take: readonly string[], recs: readonly TaskRecord[], loc: Written, at: number): Promise<void> {
    try {
      await this.host.append?.({ t: 'evict', ids: recs.map((r) => r.id), file: loc.file, offsets: loc.offsets, at, ...(loc.end !== undefined ? { end: loc.end } : {}) });
    } catch (e) { this.failed(e, take.length); }
    if (loc.end !== undefined) this.advance({ file: loc.file, end: loc.end });
  }

  /** A write failed: said in the status, the next batch smaller if for want of space; rethrown. */
  private failed(e: unknown, took: number): never {
    this.lastError = (e as Error).message;
    if ((e as { code?: string }).code === 'SWARM_ERR_DISK_FULL') this.batch = Math.max(1, took >> 1);
    throw e;
  }

  /** The recorded batch (out of retention's order already) leaves the hot state; resolves how many left. */
  private left(recs: readonly TaskRecord[], loc: Written, at: number): number {
    this.lastError = undefined;
    this.batch = Math.min(BATCH, this.batch * 2);
    recs.forEach((r, i) => {
      this.host.remove(r.id);
      this.tombstones.add(r.id, { file: loc.file, offset: loc.offsets[i]!, at, acc: r.submittedAt });
    });
    this.evictedTotal += recs.length;
    if (recs.length) this.host.evicted(recs.map((r) => r.id));
    return recs.length;
  }

  /** How many of `ids`, from the first, the archive's current file has room for, and one batch's bytes (at least one). */
  private fitting(ids: readonly string[]): number {
    if (!this.archive) return ids.length;
    const room = Math.min(this.archive.room, BATCH_BYTES);
    let sum = 0;
    for (let i = 0; i < ids.length; i++) {
      const rec = this.host.get(ids[i]!);
      sum += rec ? taskBytes(rec) : 0;
      if (sum > room) return Math.max(1, i);
    }
    return ids.length;
  }
}

/** Place `a` comes before place `b` in the archive. */
function before(a: ArchivePlace, b: ArchivePlace): boolean {
  return a.file < b.file || (a.file === b.file && a.end < b.end);
}
