import { HaveBuilder, haveBucketOf, validHave, type HaveDigest } from '../protocol/replica-have.js';
import { fromArchived } from './archive.js';
import { readArchivedMany } from './archive-read.js';
import type { Versions } from './replicate-resume.js';
import type { TaskStore } from './store.js';
import type { TaskRecord } from './task.js';

/** What a holder holds of the finished tasks, compared with this hub's (see `heldBy`). */
export interface Held {
  held: (r: TaskRecord) => boolean; buckets: number; same: number; withEvicted: number; gap: number;
  /** The buckets that differ (hub/replicate-ids.ts compares those id by id, with a holder that can). */
  differing: number[];
  /** True for a task in the part of the order the holder's copy does not cover (`gap`): always sent. */
  out: (r: TaskRecord) => boolean;
  /** Tasks of the differing buckets the holder said it holds, compared id by id (hub/replicate-ids.ts). */
  perId?: number;
}

export interface HeldInput {
  have: HaveDigest | undefined;
  all: Iterable<TaskRecord>;
  versions: Versions;
  /**
   * The ids this hub evicted since it started, with a way to read each one back (the archive). A
   * restarted hub applies its retention horizon within a second of opening, before most holders are
   * back, so a holder in step with the hub before the kill holds those tasks too: a bucket also counts
   * as held when it equals this hub's plus the evicted tasks in it, and the caller sends the holder
   * those evictions first (they never reached it). Read back only for the buckets that differ.
   */
  evicted?: { ids: readonly string[]; lookup: (id: string) => TaskRecord | undefined; readMany?: (ids: readonly string[]) => Promise<Map<string, TaskRecord>> };
  /**
   * The part of this hub's order the holder's copy does not cover (its first sync was cut, the hub
   * killed meanwhile): the tasks after `after` and before `before` (submission numbers here). They
   * stay out of the comparison and are sent; without this every bucket of a partial copy differed
   * and the whole state went again.
   */
  gap?: { after: number; before: number };
}

/**
 * For a holder that reports `have` (protocol/replica-have.ts) to a hub of another generation: a
 * predicate true for the finished tasks it already holds as this hub does, which its whole-state sync
 * leaves out; undefined without a usable digest. A task that changes after the comparison began (a
 * version past `versions.now` then) is sent whatever its bucket says. Run at once (tests), or a slice
 * at a time (`heldByAsync`): a restarted hub compares a digest per holder over its whole hot state and
 * reads back up to tens of thousands of evicted tasks, which in one turn stalled every link it serves.
 */
export function heldBy(input: HeldInput): Held | undefined {
  const g = steps(input);
  let back: Map<string, TaskRecord> | undefined;
  for (;;) {
    const n = g.next(back);
    back = undefined;
    if (n.done) return n.value;
    if (n.value) back = readEach(n.value, input.evicted!.lookup);
  }
}

/**
 * `heldBy`, yielding to the event loop after each `sliceMs` of work, the evicted tasks read back in
 * one batch (`readMany`: sequential async reads) or a few at a time.
 */
export async function heldByAsync(input: HeldInput, sliceMs = 5): Promise<Held | undefined> {
  const g = steps(input);
  let t0 = performance.now();
  let back: Map<string, TaskRecord> | undefined;
  const pause = async () => { await new Promise<void>((r) => setImmediate(r)); t0 = performance.now(); };
  for (;;) {
    const n = g.next(back);
    back = undefined;
    if (n.done) return n.value;
    const want = n.value;
    if (want) {
      const ev = input.evicted!;
      if (ev.readMany) back = await ev.readMany(want);
      else {
        back = new Map();
        for (const id of want) { const r = ev.lookup(id); if (r) back.set(id, r); if (performance.now() - t0 >= sliceMs) await pause(); }
      }
    }
    if (performance.now() - t0 >= sliceMs) await pause();
  }
}

function readEach(ids: readonly string[], lookup: (id: string) => TaskRecord | undefined): Map<string, TaskRecord> {
  const m = new Map<string, TaskRecord>();
  for (const id of ids) { const r = lookup(id); if (r) m.set(id, r); }
  return m;
}

/**
 * The comparison, pausing (a bare `yield`) every few hundred records; it yields the evicted ids it
 * needs read back, and is given them as records.
 */
function* steps({ have, all, versions, evicted, gap }: HeldInput): Generator<string[] | undefined, Held | undefined, Map<string, TaskRecord> | undefined> {
  if (!validHave(have)) return undefined;
  const at = versions.now;
  const out = (r: TaskRecord) => !!gap && r.seq > gap.after && r.seq < gap.before;
  // Two folds: every finished task here, and those as replayed only. A task this hub finished since it
  // started (run here, or handed back from what the swarm ran without a hub) is one a holder back from
  // a hub before this one left out of its digest (worker/failover-agent.ts) or never had.
  const mine = new HaveBuilder(have.n), old = new HaveBuilder(have.n);
  let i = 0, left = 0;
  for (const r of all) {
    if ((++i & 127) === 0) yield;
    if (out(r)) { if (outcome(r)) left++; continue; }
    addOutcome(mine, r);
    if (versions.versionOf(r.id) === 0) addOutcome(old, r);
  }
  // Per bucket: 0 differs, 1 the same as all here, 2 the same as the replayed ones.
  const same = new Uint8Array(have.n);
  let n = 0;
  const compare = (a: Uint32Array, b: number) => a[b] === have.h[b]! >>> 0;
  for (let b = 0; b < have.n; b++) if (compare(mine.h, b)) { same[b] = 1; n++; } else if (compare(old.h, b)) { same[b] = 2; n++; }
  let withEvicted = 0;
  if (evicted?.ids.length && n < have.n) {
    const plusAll = new HaveBuilder(have.n), plusOld = new HaveBuilder(have.n);
    plusAll.h.set(mine.h);
    plusOld.h.set(old.h);
    const touched = new Uint8Array(have.n);
    const want: string[] = [];
    let k = 0;
    for (const id of evicted.ids) { if (!same[haveBucketOf(id, have.n)]) want.push(id); if ((++k & 1023) === 0) yield; }
    const back = want.length ? (yield want) ?? new Map<string, TaskRecord>() : new Map<string, TaskRecord>();
    let i2 = 0;
    for (const [id, r] of back) {
      if ((++i2 & 127) === 0) yield;
      addOutcome(plusAll, r); addOutcome(plusOld, r); touched[haveBucketOf(id, have.n)] = 1;
    }
    for (let b = 0; b < have.n; b++) {
      if (!touched[b]) continue;
      if (compare(plusAll.h, b)) same[b] = 1; else if (compare(plusOld.h, b)) same[b] = 2; else continue;
      n++; withEvicted++;
    }
  }
  const differing: number[] = [];
  for (let b = 0; b < have.n; b++) if (!same[b]) differing.push(b);
  return {
    buckets: have.n, same: n, withEvicted, gap: left, differing, out,
    held: (r) => {
      if (!outcome(r) || out(r)) return false;
      const v = versions.versionOf(r.id), s = same[haveBucketOf(r.id, have.n)];
      return s === 1 ? v <= at : s === 2 && v === 0;
    },
  };
}

/** A finished record's outcome as hub/replicate.ts `entry` replicates it: [kind, worker, attempt]. */
export function outcome(r: TaskRecord): [3 | 4, string, number] | undefined {
  if (r.result) return [3, r.result.worker, r.result.attempt];
  if (r.state === 'failed') return [4, r.worker ?? 'hub', Math.max(1, r.attempts)];
  return undefined;
}
function addOutcome(d: HaveBuilder, r: TaskRecord): void {
  const o = outcome(r);
  if (o) d.add(r.id, o[0], o[1], o[2]);
}

/**
 * Evicted tasks of `store` read back from its archive in one batch (hub/archive-read.ts), never the
 * hot record of an id submitted anew since; undefined without an archive (a memory-only store).
 */
export function readBack(store: TaskStore): ((ids: readonly string[]) => Promise<Map<string, TaskRecord>>) | undefined {
  const dir = store.retention.archive?.dir;
  if (!dir) return undefined;
  return async (ids) => {
    const places: { id: string; file: number; offset: number }[] = [];
    let t0 = performance.now(), i = 0;
    for (const id of ids) {
      if ((++i & 255) === 0 && performance.now() - t0 >= 5) { await new Promise<void>((r) => setImmediate(r)); t0 = performance.now(); }
      if (store.queue.get(id)) continue;
      const p = store.archivedAt(id);
      if (p) places.push({ id, ...p });
    }
    const out = new Map<string, TaskRecord>();
    await readArchivedMany(dir, places, (id, a) => out.set(id, fromArchived(a)));
    return out;
  };
}
