import type { Payload } from '../protocol/index.js';
import { haveOf } from '../protocol/replica-have.js';
import { outcome } from './replicate-held.js';
import { isFinal, type TaskRecord } from './task.js';

type Digest = NonNullable<Payload<'HANDBACK'>['digest']>;

/**
 * A handback's digest round (HANDBACK `digest`): the buckets whose value, over this hub's final tasks
 * (their outcome's worker not in `skip`), is not the worker's; undefined for a digest this hub cannot
 * read (the worker then offers every id). A bucket that agrees holds, in the worker's entries, only
 * tasks final here, which the hub would not want: only final tasks are folded (an evicted id never is,
 * so a bucket where the worker still holds one differs, and its offer meets the rule for evicted ids).
 * A pass over the hot state, yielding to the event loop after each `sliceMs` of work.
 */
export async function differingBuckets(d: Digest, all: () => Iterable<TaskRecord>, sliceMs = 5): Promise<number[] | undefined> {
  const { n } = d;
  if ((n & (n - 1)) !== 0) return undefined;
  const asked = d.buckets ?? [...Array(Math.min(n, d.h.length)).keys()];
  if (asked.length !== d.h.length) return undefined;
  // Only the buckets asked: a map when they are a few of many (the sub-bucket rounds), an array otherwise.
  const index = new Map<number, number>();
  for (let i = 0; i < asked.length; i++) { if (asked[i]! >= n || index.has(asked[i]!)) return undefined; index.set(asked[i]!, i); }
  const mine = new Uint32Array(asked.length);
  const skip = new Set(d.skip);
  let t0 = performance.now(), k = 0;
  for (const r of all()) {
    if ((++k & 255) === 0 && performance.now() - t0 >= sliceMs) { await new Promise<void>((res) => setImmediate(res)); t0 = performance.now(); }
    if (!isFinal(r)) continue;
    const o = outcome(r);
    if (!o || skip.has(o[1])) continue;
    const x = haveOf(r.id, o[0], o[1], o[2], n);
    const i = index.get(x.b);
    if (i !== undefined) mine[i] = (mine[i]! ^ x.x) >>> 0;
  }
  const differ: number[] = [];
  for (let i = 0; i < asked.length; i++) if (mine[i] !== d.h[i]! >>> 0) differ.push(asked[i]!);
  return differ;
}
