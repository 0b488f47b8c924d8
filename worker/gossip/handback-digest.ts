import type { Payload } from '../../protocol/index.js';
import { HAVE_MAX_SUB_BUCKETS, haveBuckets, haveOf, subBucketCount } from '../../protocol/replica-have.js';
import { finalOutcome, type Entry } from './replica.js';

/** A HANDBACK digest round as the worker sends it. */
export type HandbackDigest = NonNullable<Payload<'HANDBACK'>['digest']>;

/** Sends one digest frame; resolves with the buckets the hub says differ, undefined if it takes no digest. */
export type AskDigest = (d: HandbackDigest) => Promise<number[] | undefined>;

/** Bucket values one digest frame carries at most (the schema's bound is 100,000). */
const MAX_VALUES = 20_000;
/** Entries per differing bucket below which their ids are offered at once instead of a round of sub-buckets. */
const SUB_MIN_AVG = 4;
/** Rounds at most: the whole digest, then sub-buckets of the buckets that differ, once more if still many. */
const MAX_ROUNDS = 3;

export interface NarrowStats { digests: number; digestValues: number }

/**
 * The entries of a handback the hub may lack: those in digest buckets whose value differs from the
 * hub's fold of its final tasks (hub/handback-digest.ts). A bucket that agrees holds only tasks final
 * at the hub, which it would not want, so leaving them out of the offer loses nothing; the ones left
 * are offered id by id as before. Buckets of many entries are split again (sub-buckets b + j*n of a
 * digest of n*k), so the offer follows what changed, not the replica's size. Undefined if the hub
 * answers a frame without `differ` (it predates digests): then every entry is offered.
 */
export async function narrowByDigest(entries: readonly Entry[], skip: string[], ask: AskDigest, stats: NarrowStats): Promise<Entry[] | undefined> {
  // Each entry's fingerprint and its bucket among the most a digest has (any smaller one is its low bits).
  let cand = entries.map((e) => {
    const o = finalOutcome(e)!;
    const { b, x } = haveOf(e.id, o[0], o[1], o[2], HAVE_MAX_SUB_BUCKETS);
    return { e, b, x };
  });
  let n = haveBuckets(cand.length);
  let asked: number[] | undefined;
  for (let round = 0; round < MAX_ROUNDS && cand.length; round++) {
    const list = asked ?? [...Array(n).keys()];
    const index = new Map<number, number>(list.map((b, i) => [b, i]));
    const h = new Uint32Array(list.length);
    for (const c of cand) { const i = index.get(c.b & (n - 1)); if (i !== undefined) h[i] = (h[i]! ^ c.x) >>> 0; }
    const differ = new Set<number>();
    for (let i = 0; i < list.length; i += MAX_VALUES) {
      const part = list.slice(i, i + MAX_VALUES);
      const got = await ask({ n, buckets: asked || i > 0 || part.length < n ? part : undefined, h: Array.from(h.subarray(i, i + part.length)), skip });
      if (!got) return undefined;
      stats.digests++;
      stats.digestValues += part.length;
      for (const b of got) differ.add(b);
    }
    cand = cand.filter((c) => differ.has(c.b & (n - 1)));
    if (!cand.length || cand.length < differ.size * SUB_MIN_AVG) break;
    const k = subBucketCount(n, cand.length / differ.size);
    if (n * k > HAVE_MAX_SUB_BUCKETS) break;
    asked = [];
    for (const b of differ) for (let j = 0; j < k; j++) asked.push(b + j * n);
    n *= k;
  }
  return cand.map((c) => c.e);
}
