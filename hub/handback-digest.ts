import type { Payload } from '../protocol/index.js';
import { HAVE_MAX_BUCKETS, haveOf } from '../protocol/replica-have.js';
import { outcome } from './replicate-held.js';
import type { StoreEvent } from './store-events.js';
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

/** Bits of a task id's hash the folds keep: every digest a worker sends has at most 2^30 buckets. */
const ID_BITS = 30;
/** Folds kept this long after the last digest, then dropped (a handback's digests come in a burst after a restart). */
const IDLE_MS = 60_000;

/** One final task as a digest folds it: its id's hash (low ID_BITS), its fingerprint, its outcome's worker. */
interface Fp { b: number; x: number; w: string }

/**
 * The hub's final tasks folded as handback digests read them, kept between digests: the first digest
 * after a restart makes them in one pass over the hot state (yielding to the loop as `differingBuckets`
 * does), every later one reads them, so the second of 25 workers handing back costs what its digest
 * asks, not another pass. Kept current by the store's events (done, failed, accepted anew, evicted),
 * from the first pass on, and dropped a minute after the last digest.
 *
 * Per task its fingerprint, in one of HAVE_MAX_BUCKETS lists by its id's hash; per outcome worker and
 * that bucket, the XOR of its tasks' fingerprints. A digest of n <= HAVE_MAX_BUCKETS buckets folds the
 * workers it does not skip (n x workers); a sub-bucket round (more buckets, a few asked) reads the
 * lists of the buckets asked.
 */
export class DigestFolds {
  private fps?: Map<string, Fp>;
  private byBucket: Set<Fp>[] = [];
  private byWorker = new Map<string, { h: Uint32Array; n: number }>();
  private making?: Promise<void>;
  private idle?: ReturnType<typeof setTimeout>;
  /** Passes over the hot state, digests answered from the folds, changes (results, failures, evictions) folded in since the pass. */
  readonly stats = { passes: 0, digests: 0, updates: 0 };

  constructor(private readonly sliceMs = 5, private readonly idleMs = IDLE_MS) {}

  /**
   * The store's events (a no-op until a digest asked for the folds). Only a result, a failure or an
   * eviction changes what is folded (a final task is never leased or queued again; one submitted anew
   * was evicted first). Each is noted, and folded in at the next digest: under a client's load a task
   * a few milliseconds old is done, and folding each at once cost the hub more than the passes saved.
   */
  readonly onStoreEvent = (e: StoreEvent): void => {
    if (!this.fps) return;
    if (e.type === 'evicted') for (const id of e.ids) this.pending.push(id);
    else if (e.type === 'done' || e.type === 'failed') this.pending.push(e.rec);
    else return;
    // Bounded: far more changes than tasks folded, and no digest since, is cheaper made again.
    if (this.pending.length > 2 * this.fps.size + 100_000) this.clear();
  };
  /** Tasks finished (a record) or evicted (an id) since the folds were last brought up to date. */
  private pending: (TaskRecord | string)[] = [];

  /** Like `differingBuckets`, from the folds (made on the first call from `all`). */
  async differing(d: Digest, all: () => Iterable<TaskRecord>): Promise<number[] | undefined> {
    const { n } = d;
    if (!Number.isInteger(n) || n < 1 || (n & (n - 1)) !== 0) return undefined;
    if (n > 2 ** ID_BITS) return differingBuckets(d, all, this.sliceMs);
    const asked = d.buckets ?? [...Array(Math.min(n, d.h.length)).keys()];
    if (asked.length !== d.h.length) return undefined;
    const seen = new Set<number>();
    for (const b of asked) { if (!Number.isInteger(b) || b < 0 || b >= n || seen.has(b)) return undefined; seen.add(b); }
    await this.made(all);
    const pending = this.pending;
    this.pending = [];
    this.stats.updates += pending.length;
    for (const x of pending) { if (typeof x === 'string') this.remove(x); else this.set(x); }
    this.stats.digests++;
    const skip = new Set(d.skip);
    const mine = new Uint32Array(asked.length);
    if (n <= HAVE_MAX_BUCKETS) {
      // Each worker's folds reduced to n buckets (bucket b of n holds the folds' buckets b mod n).
      const red = new Uint32Array(n);
      for (const [w, f] of this.byWorker) {
        if (skip.has(w)) continue;
        for (let i = 0; i < HAVE_MAX_BUCKETS; i++) red[i & (n - 1)] = red[i & (n - 1)]! ^ f.h[i]!;
      }
      for (let i = 0; i < asked.length; i++) mine[i] = red[asked[i]!]!;
    } else {
      for (let i = 0; i < asked.length; i++) {
        const a = asked[i]!;
        let x = 0;
        for (const fp of this.byBucket[a & (HAVE_MAX_BUCKETS - 1)] ?? []) if ((fp.b & (n - 1)) === a && !skip.has(fp.w)) x ^= fp.x;
        mine[i] = x >>> 0;
      }
    }
    const differ: number[] = [];
    for (let i = 0; i < asked.length; i++) if (mine[i] !== d.h[i]! >>> 0) differ.push(asked[i]!);
    return differ;
  }

  /** Drop the folds (the hub stops; or no digest for a while). */
  clear(): void {
    clearTimeout(this.idle);
    this.idle = undefined;
    this.fps = undefined;
    this.pending = [];
    this.byBucket = [];
    this.byWorker = new Map();
    this.making = undefined;
  }

  /** Tasks folded now (tests). */
  get size(): number { return this.fps?.size ?? 0; }

  private async made(all: () => Iterable<TaskRecord>): Promise<void> {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.clear(), this.idleMs);
    this.idle.unref?.();
    if (!this.making) {
      // Events from here on update what the pass has folded, and the pass reads each record as it is
      // when it gets there: either way a task is folded as it is last.
      this.fps = new Map();
      this.byBucket = Array.from({ length: HAVE_MAX_BUCKETS }, () => new Set<Fp>());
      this.byWorker = new Map();
      this.stats.passes++;
      const fps = this.fps;
      this.making = (async () => {
        let t0 = performance.now(), k = 0;
        for (const r of all()) {
          if ((++k & 255) === 0 && performance.now() - t0 >= this.sliceMs) {
            await new Promise<void>((res) => setImmediate(res));
            t0 = performance.now();
            if (this.fps !== fps) return;
          }
          this.set(r);
        }
      })();
    }
    const m = this.making;
    await m;
    // Cleared (idle, or stopped) while waiting: make them again.
    if (this.making !== m) await this.made(all);
  }

  /** Fold task `r` as it is now (its old fingerprint out, its new one in if it is final). */
  private set(r: TaskRecord): void {
    if (!this.fps) return;
    this.remove(r.id);
    if (!isFinal(r)) return;
    const o = outcome(r);
    if (!o) return;
    const { b, x } = haveOf(r.id, o[0], o[1], o[2], 2 ** ID_BITS);
    const fp: Fp = { b, x, w: o[1] };
    this.fps!.set(r.id, fp);
    this.byBucket[b & (HAVE_MAX_BUCKETS - 1)]!.add(fp);
    let f = this.byWorker.get(fp.w);
    if (!f) { f = { h: new Uint32Array(HAVE_MAX_BUCKETS), n: 0 }; this.byWorker.set(fp.w, f); }
    f.h[b & (HAVE_MAX_BUCKETS - 1)] = f.h[b & (HAVE_MAX_BUCKETS - 1)]! ^ x;
    f.n++;
  }

  private remove(id: string): void {
    const fp = this.fps?.get(id);
    if (!fp) return;
    this.fps!.delete(id);
    this.byBucket[fp.b & (HAVE_MAX_BUCKETS - 1)]!.delete(fp);
    const f = this.byWorker.get(fp.w)!;
    f.h[fp.b & (HAVE_MAX_BUCKETS - 1)] = f.h[fp.b & (HAVE_MAX_BUCKETS - 1)]! ^ fp.x;
    if (--f.n === 0) this.byWorker.delete(fp.w);
  }
}
