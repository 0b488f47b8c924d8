import { randomId } from '../protocol/index.js';
import type { TaskRecord } from './task.js';

/** How far a holder's copy goes, as STATE `sync` and HANDSHAKE `sync` carry it. */
export interface SyncMark { gen: string; ver: number; seq?: number }

/** Evicted ids remembered for resumes, at most (about 40 bytes each). */
const MAX_LOG_IDS = 200_000;

/**
 * Versions of the replicated state, so a whole-state sync cut by a lost link resumes instead of
 * starting over. Every change to a task (a store event) gets the next version; a frame a holder
 * receives tells it the version and sync position its copy now covers (STATE `sync`), and a
 * reconnecting holder reports that (HANDSHAKE `sync`). The hub then sends, instead of the whole
 * state: the ids evicted since, the tasks up to that position changed since, and the rest of the
 * sync. Versions belong to one hub process (`gen`): a restarted hub syncs in full.
 *
 * Why a frame's version is enough: frames reach a holder in order, deltas before sync chunks, and
 * a frame is marked with `flushed`, the last version already queued to every holder. So a holder
 * that got a frame marked `ver` has every change up to `ver` for the tasks the sync has covered.
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

  /** The mark of what is queued to every holder now, at sync position `seq` (none: complete). */
  mark(seq?: number): SyncMark { return seq === undefined ? { gen: this.gen, ver: this.flushedVer } : { gen: this.gen, ver: this.flushedVer, seq }; }

  changed(id: string): void { this.of.set(id, ++this.ver); }

  /** Pending changes went out to every holder's feed. */
  flushed(): void { this.flushedVer = this.ver; }

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
   * What a holder at `m` lacks, in the order to send it: tasks the sync had covered (seq up to
   * `m.seq`) and changed since `m.ver`, then the rest of the sync (every task past `m.seq`, read
   * lazily). `covered` counts the first part: those frames carry no mark.
   */
  resume(m: SyncMark, all: () => Iterable<TaskRecord>): { records: Iterable<TaskRecord>; covered: number } {
    const upTo = m.seq ?? Infinity;
    const changed: TaskRecord[] = [];
    for (const r of all()) if (r.seq <= upTo && (this.of.get(r.id) ?? 0) > m.ver) changed.push(r);
    function* rest(): Iterable<TaskRecord> {
      yield* changed;
      if (upTo === Infinity) return;
      for (const r of all()) if (r.seq > upTo) yield r;
    }
    return { records: rest(), covered: changed.length };
  }
}
