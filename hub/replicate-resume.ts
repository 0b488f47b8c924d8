import { randomId } from '../protocol/index.js';
import type { HaveDigest } from '../protocol/replica-have.js';
import type { TaskRecord } from './task.js';

/**
 * How far a holder's copy goes, as STATE `sync` and HANDSHAKE `sync` carry it; in HANDSHAKE also
 * what it holds of the finished tasks (`have`, for a hub of another `gen`), and with a cut sync's
 * `seq` the ids where the part it has ends (`last`, `next`: hub/replicate-held.ts), and whether it
 * answers a per-id comparison of the buckets that differ (`ids`: hub/replicate-ids.ts).
 */
export interface SyncMark { gen: string; ver: number; seq?: number; end?: number; have?: HaveDigest; last?: string; next?: string; ids?: boolean; sub?: boolean }

/** Evicted ids remembered for resumes, at most (about 40 bytes each). */
const MAX_LOG_IDS = 200_000;
/**
 * Changes remembered by version (`changed`), at most: 16 bytes each and the task's id (kept alive after
 * the task leaves the hot state: up to ~30 MB with 128-character ids). A holder's mark is that of the
 * last frame it was sent, seconds old at most while it is linked, so a resume finds in here what
 * changed since it; 200,000 are the last 60,000 tasks or more (three changes each: accepted, leased, done).
 */
const MAX_CHANGES = 200_000;
/** Flushes that carried new tasks remembered (`specsBy`), at most: 16 bytes each. */
const MAX_SPEC_MARKS = 100_000;

/**
 * Versions of the replicated state, so a whole-state sync cut by a lost link resumes instead of
 * starting over. Every change to a task (a store event) gets the next version; a frame a holder
 * receives tells it the version and sync position its copy now covers (STATE `sync`), and a
 * reconnecting holder reports that (HANDSHAKE `sync`). The hub then sends, instead of the whole
 * state: the ids evicted since, the tasks up to that position changed since, and the rest of the
 * sync. Versions belong to one hub process (`gen`): a restarted hub syncs in full.
 *
 * Why a frame's version is enough: frames reach a holder in order, deltas before sync chunks, and
 * a frame is marked with `flushed`, the last version already queued to every holder (a delta frame
 * with the version its chunk brings the holder to: a flush's last chunk, its version; a chunk before
 * it, its last entry's, a flush's entries going in the order of their last change). So a holder that
 * got a frame marked `ver` has every change up to `ver` for the tasks the sync has covered.
 * A holder whose deltas were dropped (hub/replicate-feed.ts) gets unmarked frames until its new
 * sync's first chunk: what it reports then predates every dropped delta.
 */
export class Versions {
  readonly gen = randomId();
  /** The last change's version. */
  private ver = 0;
  /** Changes up to this version are in frames queued to every holder. */
  private flushedVer = 0;
  private readonly of = new Map<string, number>();
  private log: { ver: number; ids: readonly string[] }[] = [];
  private logIds = 0;
  /** Evictions at or before this version are no longer known: a mark older than it syncs in full. */
  private floor = 0;
  /** Per flush that carried new tasks: its version, and the highest submission number by then (`specsBy`). */
  private specVer: number[] = [];
  private specSeq: number[] = [];
  private acceptedMax = -1;
  private acceptedDue = false;
  /**
   * Every change's version and task, in order (the last `MAX_CHANGES`): what changed since a mark,
   * without a pass over the hot state. A holder that fell behind used to cost one such pass per resume,
   * each the whole hot state, and the resumes came one after another.
   */
  private chVer: number[] = [];
  private chId: string[] = [];
  /** Changes at or before this version are no longer in `chVer`: a resume from before it passes over the hot state. */
  private chFloor = 0;

  /**
   * The mark of what is queued to every holder now, at sync position `seq` (none: complete) of a sync
   * that ends at `end` (the tasks from there on go as deltas; Infinity or none: not known).
   */
  mark(seq?: number, end?: number): SyncMark {
    if (seq === undefined) return { gen: this.gen, ver: this.flushedVer };
    return end === undefined || end === Infinity ? { gen: this.gen, ver: this.flushedVer, seq } : { gen: this.gen, ver: this.flushedVer, seq, end };
  }

  /** A change to task `id`; `seq`: it is a new task, with its spec (submission order `seq`). */
  changed(id: string, seq?: number): void {
    this.of.set(id, ++this.ver);
    this.chVer.push(this.ver);
    this.chId.push(id);
    if (this.chVer.length > MAX_CHANGES) {
      this.chFloor = this.chVer[MAX_CHANGES / 2 - 1]!;
      this.chVer.splice(0, MAX_CHANGES / 2);
      this.chId.splice(0, MAX_CHANGES / 2);
    }
    if (seq !== undefined) { if (seq > this.acceptedMax) this.acceptedMax = seq; this.acceptedDue = true; }
  }

  /** The last change's version. */
  get now(): number { return this.ver; }
  /** The version of task `id`'s last change (0: none since this hub process started). */
  versionOf(id: string): number { return this.of.get(id) ?? 0; }

  /** Pending changes went out to every holder's feed. */
  flushed(): void {
    this.flushedVer = this.ver;
    if (!this.acceptedDue) return;
    this.acceptedDue = false;
    this.specVer.push(this.flushedVer);
    this.specSeq.push(this.acceptedMax);
    if (this.specVer.length > MAX_SPEC_MARKS) { this.specVer.splice(0, MAX_SPEC_MARKS / 2); this.specSeq.splice(0, MAX_SPEC_MARKS / 2); }
  }

  /**
   * The highest submission number whose spec was queued to every holder by version `ver` (-1: not
   * known): new tasks go out with their spec in the flush after their acceptance, in submission order.
   */
  specsBy(ver: number): number {
    let lo = 0, hi = this.specVer.length - 1, at = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (this.specVer[mid]! <= ver) { at = mid; lo = mid + 1; } else hi = mid - 1; }
    return at < 0 ? -1 : this.specSeq[at]!;
  }

  evicted(ids: readonly string[]): void {
    this.ver++;
    for (const id of ids) this.of.delete(id);
    this.log.push({ ver: this.ver, ids });
    this.logIds += ids.length;
    while (this.logIds > MAX_LOG_IDS && this.log.length > 1) {
      const g = this.log.shift()!;
      this.logIds -= g.ids.length;
      this.floor = g.ver;
    }
    this.flushedVer = this.ver; // queued at once, behind the deltas flushed before
  }

  /**
   * Every id this hub process evicted, oldest first, while it still knows them all (none forgotten
   * past the log's bound); undefined once it does not.
   */
  evictedAll(): string[] | undefined { return this.floor === 0 ? this.evictedSince(0) : undefined; }

  /** True if a holder at `m` can be brought up to date from here without the whole state. */
  canResume(m: SyncMark | undefined): m is SyncMark {
    return !!m && m.gen === this.gen && m.ver >= this.floor && m.ver <= this.flushedVer;
  }

  /** Ids evicted after version `ver`, in order. */
  evictedSince(ver: number): string[] {
    const out: string[] = [];
    for (const g of this.log) if (g.ver > ver) out.push(...g.ids);
    return out;
  }

  /**
   * The records of the tasks changed since version `ver` (their last change after it), in submission
   * order, from the change log; undefined if the log no longer reaches back to `ver`.
   */
  changedSince(ver: number, get: (id: string) => TaskRecord | undefined): TaskRecord[] | undefined {
    if (ver < this.chFloor) return undefined;
    let lo = 0, hi = this.chVer.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.chVer[mid]! <= ver) lo = mid + 1; else hi = mid; }
    const out: TaskRecord[] = [];
    for (let i = lo; i < this.chVer.length; i++) {
      const id = this.chId[i]!;
      // An id once, at its last change (the map holds that version); an evicted one is in neither.
      if (this.of.get(id) !== this.chVer[i]) continue;
      const r = get(id);
      if (r) out.push(r);
    }
    return out.sort((a, b) => a.seq - b.seq);
  }

  /**
   * What a holder at `m` lacks, in the order to send it: tasks the sync had covered (seq up to
   * `m.seq`) and changed since `m.ver`, then the rest of the sync (every task past `m.seq` up to the
   * sync's `end`, if known, and those after it changed since `m.ver`; read lazily). `covered` counts
   * the first part: those frames carry no mark. With `get` (a hot task by id) the changed tasks come
   * from the change log; `scanned`: they took a pass over the hot state instead (no `get`, or the
   * mark is older than the log).
   */
  resume(m: SyncMark, all: () => Iterable<TaskRecord>, end = Infinity, get?: (id: string) => TaskRecord | undefined): { records: Iterable<TaskRecord>; covered: number; bare: (r: TaskRecord) => boolean; scanned: boolean } {
    const upTo = m.seq ?? Infinity;
    const of = this.of;
    const logged = get && this.changedSince(m.ver, get);
    const changed = logged ? logged.filter((r) => r.seq <= upTo) : [];
    if (!logged) for (const r of all()) if (r.seq <= upTo && (of.get(r.id) ?? 0) > m.ver) changed.push(r);
    function* rest(): Iterable<TaskRecord> {
      yield* changed;
      if (upTo === Infinity) return;
      // From `end` on (the tasks submitted after the sync began) the holder got every change by
      // `m.ver` as deltas: only those changed since (read when the sync gets there). A resume that
      // sent them all again extended each sync to the store's tail, and under full load a holder
      // that fell behind fell behind again before the sync ended, over and over.
      for (const r of all()) if (r.seq > upTo && (r.seq < end || (of.get(r.id) ?? 0) > m.ver)) yield r;
    }
    // The holder has the spec of every task its sync covered (up to `seq`) and, its sync complete, of
    // every task sent by version `ver`: those go without it (a spec re-encoded and re-signed for a
    // holder that has it was most of what a fallen-behind holder cost the hub).
    const specs = m.seq ?? this.specsBy(m.ver);
    const sent = end === Infinity ? -1 : this.specsBy(m.ver);
    return { records: rest(), covered: changed.length, scanned: !logged, bare: (r) => (r.seq <= specs && r.seq <= upTo) || (r.seq >= end && r.seq <= sent) };
  }
}
