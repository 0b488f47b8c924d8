/**
 * What a replica holder already holds, compactly: HANDSHAKE `sync.have`. A holder reconnecting to a
 * restarted hub (a new `gen`: its version marks mean nothing there) reports, per bucket of task ids,
 * an XOR of the final entries it holds with their spec; the hub computes the same over its finished
 * records and leaves out of the whole-state sync the finished tasks of every bucket that agrees.
 * Finished tasks are most of the state and never change, so a restart costs the hub what changed,
 * not a re-encoding and re-signing of its whole history for every holder.
 *
 * Both sides hash the outcome as the hub replicates it (hub/replicate.ts `entry`): a result's
 * producer and attempt, or a failure's. A bucket that differs (an entry the holder lacks, one it
 * holds that the hub does not, a different outcome) is sent whole, as before.
 */

/** The digest as HANDSHAKE `sync.have` carries it: `n` buckets (a power of two), one 32-bit XOR each. */
export interface HaveDigest { n: number; h: number[] }

/** Most buckets a digest has (about 11 characters each on the wire). */
export const HAVE_MAX_BUCKETS = 4096;

/**
 * Most buckets a per-id comparison splits a digest into (SYNC_IDS `k`: up to 256 sub-buckets of each
 * of up to 4096): a sub-bucket of bucket b is a bucket of a digest of n*k, whose low bits are b.
 */
export const HAVE_MAX_SUB_BUCKETS = HAVE_MAX_BUCKETS * 256;

/**
 * Sub-buckets to split each bucket of an `n`-bucket digest in, for about two entries each at `avg`
 * entries a bucket: a power of two from 2 to 256, and n times it within HAVE_MAX_SUB_BUCKETS where n
 * leaves room. The hub's sub-bucket round (hub/replicate-ids.ts) and a handback's (worker/gossip/handback-digest.ts) split alike.
 */
export function subBucketCount(n: number, avg: number): number {
  let k = 2;
  while (k * 2 <= avg && k < 256 && n * k * 2 <= HAVE_MAX_SUB_BUCKETS) k *= 2;
  return k;
}

/** FNV-1a, 32 bit, of a string, continuing from `h`. */
function fnvStr(s: string, h = 0x811c9dc5): number {
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193); }
  return h;
}

/** The bucket count for `finals` final entries: about 16 a bucket, 16 to 4096 buckets. */
export function haveBuckets(finals: number): number {
  let n = 16;
  while (n < HAVE_MAX_BUCKETS && n * 16 < finals) n *= 2;
  return n;
}

/** The bucket of task `id` among `n`. */
export function haveBucketOf(id: string, n: number): number { return (fnvStr(id) >>> 0) & (n - 1); }

/** One finished task's place and fingerprint: `kind` 3 a result, 4 a failure. */
export function haveOf(id: string, kind: 3 | 4, worker: string, attempt: number, n: number): { b: number; x: number } {
  const idh = fnvStr(id) >>> 0;
  let x = Math.imul(fnvStr(worker, Math.imul(0x811c9dc5 ^ kind, 0x01000193)) ^ attempt, 0x01000193);
  // murmur3's finalizer over the id and outcome hashes mixed: XOR sums of these do not cancel by accident.
  x = (idh ^ Math.imul(x, 0x9e3779b1)) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return { b: idh & (n - 1), x: (x ^ (x >>> 16)) >>> 0 };
}

/** Accumulates a digest over final entries. */
export class HaveBuilder {
  readonly h: Uint32Array;
  constructor(readonly n: number) { this.h = new Uint32Array(n); }
  add(id: string, kind: 3 | 4, worker: string, attempt: number): void {
    const { b, x } = haveOf(id, kind, worker, attempt, this.n);
    this.h[b] = (this.h[b]! ^ x) >>> 0;
  }
  digest(): HaveDigest { return { n: this.n, h: Array.from(this.h) }; }
}

/** True if `d` is a digest this side can compare with (a power of two buckets, one hash each). */
export function validHave(d: HaveDigest | undefined): d is HaveDigest {
  return !!d && Number.isInteger(d.n) && d.n >= 1 && d.n <= HAVE_MAX_BUCKETS && (d.n & (d.n - 1)) === 0 && Array.isArray(d.h) && d.h.length === d.n;
}
