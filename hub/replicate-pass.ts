import type { TaskRecord } from './task.js';

/**
 * What a lazy pass over the hot state yields besides records: every `PASS_EVERY` records it looked at
 * (sent or not), a marker with the submission order of the last of them (`pass`; -1: none,
 * the pass is not in submission order). A sync reads its records from such a pass a chunk at a time,
 * a chunk in a turn of the hub's event loop; a pass that skipped most records (a keeper's open tasks
 * among a hot state of finished ones, a resume's unchanged tasks, a repair window's start) ran
 * between two yields over the whole hot state in one turn. The markers let the sync count that work
 * against its budget a turn and stop there, and tell it how far the pass got (a delta for a task the
 * pass went past goes out as a delta: hub/replicate-feed.ts `ahead`).
 */
export interface Pass { pass: number }
export type Scanned = TaskRecord | Pass;
/** Records looked at between two markers. */
export const PASS_EVERY = 1024;

export function isPass(x: Scanned): x is Pass { return (x as Pass).pass !== undefined; }

/** The records of `src` that `keep` is true for, and the markers of `src`, lazily, with a marker every `PASS_EVERY` records looked at. */
export function* keepScanned(src: Iterable<Scanned>, keep: (r: TaskRecord) => boolean): Generator<Scanned> {
  let n = 0;
  for (const x of src) {
    if (isPass(x)) { n = 0; yield x; continue; }
    if (keep(x)) yield x;
    if (++n >= PASS_EVERY) { n = 0; yield { pass: x.seq }; }
  }
}
