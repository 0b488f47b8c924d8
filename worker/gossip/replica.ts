// Over 300 lines on purpose: the merge, its deferred fingerprints and the digests that read them share one set of maps.
/**
 * The replicated run state: every task's spec, lease and result, keyed by task id. Merging is a
 * join over a total order per field, so it is commutative, associative and idempotent: replicas
 * that have seen the same updates hold the same state whatever the order they saw them in, and a
 * result is recorded once per task id (the winner among rivals is the lowest (attempt, worker)).
 */

import type { ReplicaEntry, WireLease, WireOutcome, WireSpec } from '../../protocol/index.js';
import { IdRing } from '../../protocol/id-ring.js';
import { HaveBuilder, haveBucketOf, haveBuckets, haveOf, type HaveDigest } from '../../protocol/replica-have.js';
import { signResult, signSpec } from '../../protocol/result-mac.js';
import { fnv, fnvNum, fnvStr, pairHash } from './fingerprint.js';
import { blobBytes, pack, unpack, type Stored } from './replica-pack.js';

/** A task spec as replicated: the hub's TaskSpec, carried whole (the wire type names what scheduling reads). */
export type ReplicaSpec = WireSpec;

/**
 * A lease handed out by a coordinator. `epoch` is the coordinator's fencing term. `attempt` numbers
 * the leases of a task; `unrun` counts those handed back without running (the member was busy or
 * fenced them), which do not count against the task's max_attempts.
 */
export type Lease = WireLease;

/** A finished attempt: a result or a final error. */
export type Outcome = WireOutcome;

/** One task's replicated entry; also the delta unit (fields left out are unknown to the sender). */
export type Entry = ReplicaEntry;

export type EntryState = 'queued' | 'leased' | 'done' | 'failed';

/** A digest chunk: hashes of entries with ids in [lo, hi]. */
export interface DigestChunk { lo: string; hi: string; d: [string, number][] }

/** Buckets of the summary digest (`buckets()`): a round costs O(buckets), not O(entries), when little differs. */
export const BUCKETS = 256;

/**
 * Sub-buckets each summary bucket splits in at most, kept on merge like the buckets (sub-bucket j of
 * bucket b, split in k, holds the ids whose fingerprint mod 256k is b + 256j). A sync round compares
 * the sub-buckets of the buckets that differ before naming any id, so what it details follows what
 * differs: at 100,000 entries a bucket holds about 390, a sub-bucket about 6.
 */
export const SUB_BUCKETS = 64;
const FINE = BUCKETS * SUB_BUCKETS;

/** True if `k` splits a bucket as `SUB_BUCKETS` allows: a power of two from 1 to it. */
export function validSplit(k: unknown): k is number {
  return Number.isInteger(k) && (k as number) >= 1 && (k as number) <= SUB_BUCKETS && ((k as number) & ((k as number) - 1)) === 0;
}

const cmpStr = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Total order on outcomes: lower attempt, then lower worker id, wins ("first writer" deterministically). */
function outcomeWins(a: Outcome, b: Outcome): boolean {
  return a.attempt !== b.attempt ? a.attempt < b.attempt : cmpStr(a.worker, b.worker) < 0;
}

/** Total order on leases: the later (attempt, epoch, worker) wins; a revocation beats the same lease. */
function leaseWins(a: Lease, b: Lease): boolean {
  if (a.attempt !== b.attempt) return a.attempt > b.attempt;
  if (a.epoch !== b.epoch) return a.epoch > b.epoch;
  const c = cmpStr(a.worker, b.worker);
  if (c !== 0) return c > 0;
  if (!!a.revoked !== !!b.revoked) return !!a.revoked;
  // Two revocations of one lease: the one that counts it as run (fewer unrun) wins, the safe side.
  return (a.unrun ?? 0) < (b.unrun ?? 0);
}

function stateOf(e: Entry): EntryState {
  if (e.result) return 'done';
  if (e.failure) return 'failed';
  if (e.lease && !e.lease.revoked) return 'leased';
  return 'queued';
}

/** The summary-digest bucket of a task id. */
export function bucketOf(id: string): number { return fnv(id) % BUCKETS; }

/**
 * Evicted ids a replica remembers, so a peer's copy does not bring them back: the hub's own duplicate
 * window at the default horizon (hub/dup-window.ts `Tombstones`). A ring allocated at this bound
 * (about 57 bytes an id, 5.7 MB), resident once an eighth of it is used: a holder, which forgets
 * every evicted task, gets there early and stays flat after; a member that remembers only the few
 * ids it held itself pays about the ids it holds and the ring's 1 MB index.
 */
const FORGOTTEN_MAX = 100_000;

/**
 * Ids `have` leaves out. `version`, if the owner keeps one, changes with every change to the set;
 * without it the set's contents are fingerprinted (a pass over the set, not over the replica).
 */
export type Excluded = ReadonlySet<string> & { readonly version?: number };

/** What a cached digest was computed without: the set's version, or its size and two order-free sums of its ids' hashes. */
function excludedKey(x: Excluded | undefined): string {
  if (!x) return '';
  if (x.version !== undefined) return `v${x.version}`;
  let a = 0, b = 0;
  for (const id of x) { const h = fnv(id); a = (a ^ h) >>> 0; b = (b + Math.imul(h, 0x9e3779b1)) >>> 0; }
  return `${x.size}:${a}:${b}`;
}

/**
 * An entry's outcome as `have` counts it, [kind, worker, attempt] (kind 3 a result, 4 a failure), or
 * undefined if it is left out: no spec (the hub sends it again, spec and all), not final, or in
 * `without`. The digest and the per-id comparison read it here alike: counted apart, a task the
 * digest held would be wanted by the comparison, or the other way round.
 */
function haveOutcome(e: Entry, without?: Excluded): [3 | 4, string, number] | undefined {
  if (!e.spec || without?.has(e.id)) return undefined;
  return finalOutcome(e);
}

/** A final entry's outcome as the digests fold it, [kind, worker, attempt] (kind 3 a result, 4 a failure); undefined if not final. */
export function finalOutcome(e: Entry): [3 | 4, string, number] | undefined {
  if (e.result) return [3, e.result.worker, e.result.attempt];
  if (e.failure) return [4, e.failure.worker, e.failure.attempt];
  return undefined;
}

/** The sizes of a replica's structures (each bounded by the retention horizon, see `forget` and `shed`). */
export interface ReplicaSizes { entries: number; hashes: number; inBuckets: number; unhashed: number; open: number; forgotten: number; forgottenOrder: number; /** The evicted ids' ring, allocated at its bound on the first. */ forgottenBytes: number; blobBytes: number }

export class Replica {
  /**
   * This member's id and credential key: the results it records and the specs it creates carry its
   * MAC (protocol/result-mac.ts), so whoever hands them back, a hub knows who produced them.
   */
  signer?: { id: string; key: string };
  /** Final entries are kept packed (replica-pack.ts): their prompt and text off the JS heap. */
  private readonly entries = new Map<string, Stored>();
  /** Bytes of the packed entries' blobs, kept on merge and drop. */
  private blobTotal = 0;
  /** Each entry's `hash`, kept on merge: digests run every sync round and must not rehash everything. */
  private readonly hashes = new Map<string, number>();
  /** Per bucket, the XOR of its entries' (id, hash) fingerprints: kept on merge, compared first in a sync round. */
  private readonly bucketHash = new Uint32Array(BUCKETS);
  /** Per finest sub-bucket (fingerprint mod BUCKETS * SUB_BUCKETS), the XOR of its entries' fingerprints: a bucket's is the XOR of its SUB_BUCKETS. */
  private readonly fineHash = new Uint32Array(FINE);
  /**
   * Per finest sub-bucket, its ids (made on first use, dropped when empty): a sync round reads the
   * sub-buckets that differ, not whole buckets nor the whole history.
   */
  private readonly inFine: (Set<string> | undefined)[] = new Array<Set<string> | undefined>(FINE);
  /**
   * Ids merged since their fingerprints were last brought up to date. In star mode a holder merges
   * every delta the hub sends and nobody asks for a digest until a failover: fingerprinting each merge
   * was about half of a holder's merge time, so it waits here until a digest is asked for (`settle`).
   * A list, not a set: an id merged twice is hashed once anyway (its hash is unchanged the second
   * time), and a push costs less than a set insertion into a table as large as the replica's history.
   * Settled early once it is much longer than the replica, so it stays bounded.
   */
  private unhashed: string[] = [];
  /**
   * Ids of entries not final yet: what a coordinator dispatches from (a run's history can be long).
   * Made on first use, from the entries in their order (a set kept from the first merge holds them in
   * that order too), then kept on merge: in star mode nobody reads it, and a holder would pay two set
   * operations a task for it.
   */
  private open?: Set<string>;
  /** Entries per state, kept on merge (status is written every second). */
  private readonly byState: Record<EntryState, number> = { queued: 0, leased: 0, done: 0, failed: 0 };
  private readonly listeners: ((e: Entry, delta: Entry, becameFinal: boolean) => void)[] = [];
  private nextSeq = 0;
  private finals = 0;
  /**
   * Ids the hub evicted (its retention horizon), oldest first: a final entry for one (a peer's copy
   * in a sync round) is not merged back. Bounded (past it the oldest go); a spec without an outcome
   * (the id submitted anew after its duplicate window) is merged and clears the mark.
   */
  private readonly forgotten = new IdRing(FORGOTTEN_MAX, FORGOTTEN_MAX / 8);
  /** Merges and drops so far: `have` is computed again only after one (a pass over the whole history). */
  private changes = 0;
  private haveAt?: { changes: number; without?: Excluded; key: string; d: HaveDigest };
  private anchorsAt?: { changes: number; seq: number; end?: number; a: { last?: string; next?: string } };

  /** Tasks known, in submission order (dispatch order adds priority: sched's `compareRanked`). */
  ids(): string[] {
    return [...this.entries.values()].sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity) || cmpStr(a.id, b.id)).map((e) => e.id);
  }
  /** Ids of tasks not final yet, in submission order: O(open), not O(history). */
  openIds(): string[] {
    const es: Entry[] = [];
    for (const id of this.openSet()) es.push(this.entries.get(id)!);
    return es.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity) || cmpStr(a.id, b.id)).map((e) => e.id);
  }
  /** Entries not final yet, in no particular order (a coordinator orders them itself). */
  *openEntries(): IterableIterator<Entry> { for (const id of this.openSet()) yield this.entries.get(id)!; }
  private openSet(): Set<string> {
    if (!this.open) {
      const open = new Set<string>();
      for (const [id, e] of this.entries) if (!e.result && !e.failure) open.add(id);
      this.open = open;
    }
    return this.open;
  }
  /** The whole entry (a final one is unpacked: a new object each call). */
  get(id: string): Entry | undefined { const s = this.entries.get(id); return s && unpack(s); }
  /**
   * The entry as stored, without unpacking: every field but a final entry's `spec.prompt` and
   * `result.text`. For readers of ids, leases, workers and attempts over many entries (a reconcile's selection).
   */
  peek(id: string): Entry | undefined { return this.entries.get(id); }
  get size(): number { return this.entries.size; }
  /** Count of final tasks: grows monotonically, a cheap measure of how fresh a replica is. */
  get finalCount(): number { return this.finals; }

  state(id: string): EntryState | undefined {
    const e = this.entries.get(id);
    return e ? stateOf(e) : undefined;
  }

  counts(): Record<EntryState, number> { return { ...this.byState }; }

  /**
   * Called with the merged entry, the delta that changed it (for re-gossip), and whether this merge
   * made the task final (once per task: a final entry stays final). Returns an unsubscribe.
   */
  onChange(fn: (e: Entry, delta: Entry, becameFinal: boolean) => void): () => void {
    this.listeners.push(fn);
    return () => { const i = this.listeners.indexOf(fn); if (i >= 0) this.listeners.splice(i, 1); };
  }

  /** Add submitted tasks (the hub's, in its order). Returns the deltas. */
  addTasks(specs: ReplicaSpec[]): Entry[] {
    const out: Entry[] = [];
    for (const spec of specs) {
      const d: Entry = { id: spec.id, spec, seq: this.nextSeq };
      if (this.signer) d.spec_mac = signSpec(this.signer.key, this.signer.id, spec);
      if (this.merge(d)) out.push(d);
    }
    return out;
  }

  /** Lease a task to `worker` under `epoch`: attempt = previous attempt + 1. */
  lease(id: string, worker: string, epoch: number, until: number): Entry | undefined {
    const e = this.entries.get(id);
    if (!e || e.result || e.failure) return undefined;
    const d: Entry = { id, lease: { worker, attempt: (e.lease?.attempt ?? 0) + 1, epoch, until } };
    if (e.lease?.unrun) d.lease!.unrun = e.lease.unrun;
    return this.merge(d) ? d : undefined;
  }

  /**
   * Re-issue the current lease under a newer coordinator term: same worker and attempt, a later
   * epoch and deadline. A new coordinator does this for the leases it inherits (from the hub, or from
   * an earlier term), so they lapse on its clock and its assignment reaches the holder.
   */
  renew(id: string, epoch: number, until: number): Entry | undefined {
    const e = this.entries.get(id);
    if (!e?.lease || e.lease.revoked || e.result || e.failure || e.lease.epoch >= epoch) return undefined;
    const d: Entry = { id, lease: { ...e.lease, epoch, until } };
    return this.merge(d) ? d : undefined;
  }

  /** Hand a lease back (its holder died, it expired, or the holder refused it: `unrun`). */
  revoke(id: string, unrun = false): Entry | undefined {
    const e = this.entries.get(id);
    if (!e?.lease || e.lease.revoked || e.result || e.failure) return undefined;
    const d: Entry = { id, lease: { ...e.lease, revoked: true } };
    if (unrun) d.lease!.unrun = (e.lease.unrun ?? 0) + 1;
    return this.merge(d) ? d : undefined;
  }

  /** Record an outcome; returns the delta if it changed the state (i.e. it won). */
  record(id: string, o: Outcome, final = true): Entry | undefined {
    const s = this.signer;
    if (s && o.worker === s.id && typeof o.text === 'string' && !o.mac) o = { ...o, mac: signResult(s.key, id, o.attempt, o.text) };
    const d: Entry = o.error ? (final ? { id, failure: o } : { id }) : { id, result: o };
    return this.merge(d) ? d : undefined;
  }

  /**
   * Drop the entries of tasks that left the hub's hot state (its retention horizon): the replica stays
   * as bounded as the hub. The hub evicts only finished tasks, so an entry here that is not final is a
   * stale copy (its outcome never reached this replica: a holder's deltas dropped while it was behind,
   * and the task evicted before the sync that replaced them got to it); it goes too, else it stayed
   * for good, spec and all. Only ids dropped here are remembered: one this replica never held (most of
   * them, for a member that holds only its own results) costs nothing, and its peers drop it when the
   * hub's eviction reaches them. Returns how many went.
   */
  forget(ids: readonly string[]): number {
    this.settle();
    let n = 0;
    for (const id of ids) {
      const e = this.entries.get(id);
      if (!e) continue;
      if (!this.forgotten.has(id)) this.forgotten.push(id);
      this.drop(id, e);
      n++;
    }
    return n;
  }

  /**
   * Drop every entry `keep` refuses (it sees the entry as `peek` does), without remembering it (a peer or the hub may send it again):
   * a member that does not hold the replicated state sheds what it gathered in gossip mode once the
   * hub has it all back. Returns how many went.
   */
  shed(keep: (e: Entry) => boolean): number {
    this.settle();
    const gone: [string, Entry][] = [];
    for (const [id, e] of this.entries) if (!keep(e)) gone.push([id, e]);
    for (const [id, e] of gone) this.drop(id, e);
    return gone.length;
  }

  /**
   * Drop the entries of `ids` that `keep` refuses (it sees them as `peek` does), without remembering
   * them: a keeper of the open tasks drops those the hub says finished. Returns how many went.
   */
  discard(ids: Iterable<string>, keep: (e: Entry) => boolean): number {
    this.settle();
    let n = 0;
    for (const id of ids) {
      const e = this.entries.get(id);
      if (!e || keep(e)) continue;
      this.drop(id, e);
      n++;
    }
    return n;
  }

  /** Remove one entry from every structure that holds it (its fingerprints are settled). */
  private drop(id: string, e: Entry): void {
    const h = this.hashes.get(id);
    if (h !== undefined) {
      const idh = fnv(id);
      const x = pairHash(idh, h);
      const b = idh % BUCKETS, f = idh % FINE;
      this.bucketHash[b] = (this.bucketHash[b]! ^ x) >>> 0;
      this.fineHash[f] = (this.fineHash[f]! ^ x) >>> 0;
      const set = this.inFine[f];
      if (set) { set.delete(id); if (set.size === 0) this.inFine[f] = undefined; }
      this.hashes.delete(id);
    }
    this.byState[stateOf(e)]--;
    this.open?.delete(id);
    this.blobTotal -= blobBytes(e);
    this.entries.delete(id);
    this.changes++;
  }

  /** How many entries each structure holds now (tests and benches check they stay bounded). */
  sizes(): ReplicaSizes {
    let inBuckets = 0;
    for (const b of this.inFine) inBuckets += b?.size ?? 0;
    return { entries: this.entries.size, hashes: this.hashes.size, inBuckets, unhashed: this.unhashed.length, open: this.open?.size ?? 0, forgotten: this.forgotten.size, forgottenOrder: this.forgotten.slotsUsed, forgottenBytes: this.forgotten.bytes, blobBytes: this.blobTotal };
  }

  /** Merge an entry or delta; true if anything changed. */
  merge(d: Entry): boolean {
    if (!d || typeof d.id !== 'string') return false;
    if (this.forgotten.size && this.forgotten.has(d.id)) {
      if (d.result || d.failure || !d.spec) return false;
      this.forgotten.delete(d.id);
    }
    const cur = this.entries.get(d.id);
    const e: Stored = cur ? { ...cur } : { id: d.id };
    let changed = !cur;
    if (d.spec && !e.spec) { e.spec = d.spec; if (d.spec_mac) e.spec_mac = d.spec_mac; changed = true; }
    if (d.seq !== undefined && (e.seq === undefined || d.seq < e.seq)) { e.seq = d.seq; changed = true; }
    if (d.lease && (!e.lease || leaseWins(d.lease, e.lease))) { e.lease = d.lease; changed = true; }
    const wasFinal = !!(e.result || e.failure);
    if (d.result && (!e.result || outcomeWins(d.result, e.result))) { e.result = d.result; changed = true; }
    if (d.failure && (!e.failure || outcomeWins(d.failure, e.failure))) { e.failure = d.failure; changed = true; }
    if (!changed) return false;
    const isFinal = !!(e.result || e.failure);
    const becameFinal = !wasFinal && isFinal;
    if (becameFinal) this.finals++;
    if (e.seq !== undefined && e.seq >= this.nextSeq) this.nextSeq = e.seq + 1;
    if (cur) this.byState[stateOf(cur)]--;
    this.byState[stateOf(e)]++;
    // Every entry not final is in `open` from its first merge, and a final one never leaves that
    // state: the set changes only when an entry appears open or becomes final.
    const open = this.open;
    if (open) { if (isFinal) { if (!wasFinal && cur) open.delete(d.id); } else if (!cur) open.add(d.id); }
    // A final entry is stored packed; an open one as merged (dispatch reads its spec, and it is soon final).
    const stored = isFinal ? pack(e, cur) : e;
    this.blobTotal += blobBytes(stored) - (cur ? blobBytes(cur) : 0);
    this.entries.set(d.id, stored);
    this.changes++;
    this.unhashed.push(d.id);
    if (this.unhashed.length > 4 * this.entries.size + 1024) this.settle();
    if (this.listeners.length) {
      // Listeners see the whole entry: the merged one, unless it was merged onto a packed one (a shell).
      const whole = cur?.blob ? unpack(stored) : e;
      for (const fn of this.listeners) fn(whole, d, becameFinal);
    }
    return true;
  }

  /** Bring the fingerprints (entry hashes, bucket sums) up to date with the merges since the last call. */
  private settle(): void {
    if (this.unhashed.length === 0) return;
    const ids = this.unhashed;
    this.unhashed = [];
    for (const id of ids) {
      const h = this.hash(this.entries.get(id)!);
      const old = this.hashes.get(id);
      if (old === h) continue;
      const idh = fnv(id);
      const b = idh % BUCKETS, f = idh % FINE;
      let x = pairHash(idh, h);
      if (old !== undefined) x ^= pairHash(idh, old);
      else (this.inFine[f] ??= new Set<string>()).add(id);
      this.bucketHash[b] = (this.bucketHash[b]! ^ x) >>> 0;
      this.fineHash[f] = (this.fineHash[f]! ^ x) >>> 0;
      this.hashes.set(id, h);
    }
  }

  /** Fingerprint of what merge compares; equal fingerprints mean nothing to exchange. */
  hash(e: Entry): number {
    // Field by field into one FNV state (a merge is the holder's hot path: no string is built).
    const l = e.lease, r = e.result, f = e.failure;
    let h = fnvNum(e.spec ? 1 : 0, 0x811c9dc5);
    h = fnvNum(e.seq ?? -1, h);
    if (l) h = fnvNum(l.unrun ?? 0, fnvNum(l.revoked ? 1 : 0, fnvStr(l.worker, fnvNum(l.epoch, fnvNum(l.attempt, fnvNum(2, h))))));
    if (r) h = fnvStr(r.worker, fnvNum(r.attempt, fnvNum(3, h)));
    if (f) h = fnvStr(f.worker, fnvNum(f.attempt, fnvNum(4, h)));
    return h >>> 0;
  }

  /** Digest of the whole replica, in chunks of at most `perChunk` ids covering disjoint id ranges. */
  digest(perChunk = 2000): DigestChunk[] {
    this.settle();
    const ids = [...this.entries.keys()].sort(cmpStr);
    const out: DigestChunk[] = [];
    for (let i = 0; i < ids.length || out.length === 0; i += perChunk) {
      const part = ids.slice(i, i + perChunk);
      const lo = i === 0 ? '' : part[0]!;
      const next = ids[i + perChunk];
      // hi is exclusive of the next chunk's first id.
      const hi = next ?? '\uffff';
      out.push({ lo, hi, d: part.map((id) => [id, this.hashes.get(id)!]) });
      if (part.length === 0) break;
    }
    return out;
  }

  /**
   * What this copy holds of the hub's finished tasks (protocol/replica-have.ts): a holder reconnecting
   * to a restarted hub reports it, and gets only the buckets that differ. Entries without their spec
   * are not counted: the hub sends those again, spec and all; nor those in `without`.
   */
  have(without?: Excluded): HaveDigest {
    // A worker reconnecting again and again to a hub that is down asks each time: the copy seldom changed since.
    const key = excludedKey(without);
    const c = this.haveAt;
    if (c && c.changes === this.changes && c.without === without && c.key === key) return c.d;
    const d = new HaveBuilder(haveBuckets(this.finals));
    for (const e of this.entries.values()) { const o = haveOutcome(e, without); if (o) d.add(e.id, ...o); }
    this.haveAt = { changes: this.changes, without, key, d: d.digest() };
    return this.haveAt.d;
  }

  /**
   * A finished entry's fingerprint as `have` counts it (protocol/replica-have.ts `haveOf`), or
   * undefined if `have` leaves it out.
   */
  private haveHash(e: Entry, without?: Excluded): number | undefined {
    const o = haveOutcome(e, without);
    return o && haveOf(e.id, ...o, 1).x;
  }

  /**
   * A restarted hub's per-id comparison of digest buckets that differ (SYNC_IDS): of `ids`, with the
   * hub's fingerprints `h`, those this copy lacks or holds otherwise (`want`); and the finished tasks
   * it counts in `buckets` (of `n`) that the hub did not name (`extra`: it may have evicted them).
   * Reads only those buckets (the summary buckets hold them: both are FNV-1a of the id, masked).
   */
  compareIds(n: number, buckets: readonly number[], ids: readonly string[], h: readonly number[], without?: Excluded): { want: string[]; extra: string[] } {
    this.settle();
    const want: string[] = [];
    for (let i = 0; i < ids.length; i++) {
      const e = this.entries.get(ids[i]!);
      if (!e || this.haveHash(e, without) !== (h[i]! >>> 0)) want.push(ids[i]!);
    }
    const asked = new Set(buckets);
    const named = new Set(ids);
    const extra: string[] = [];
    for (const id of this.idsIn(n, asked)) {
      if (named.has(id) || !asked.has(haveBucketOf(id, n))) continue;
      const e = this.entries.get(id);
      if (e && this.haveHash(e, without) !== undefined) extra.push(id);
    }
    return { want, extra };
  }

  /**
   * A restarted hub's sub-bucket values (SYNC_IDS with `k`): of `buckets` (of `n`), each split in `k`
   * (sub-bucket j of b is bucket b + j*n of n*k), those whose XOR of fingerprints here, counted as
   * `have` counts, differs from the hub's `sums` (k per bucket, in order). The hub then names the ids
   * of those only.
   */
  differingSubs(n: number, k: number, buckets: readonly number[], sums: readonly number[], without?: Excluded): number[] {
    this.settle();
    const nk = n * k;
    const mine = new Set(buckets);
    const acc = new Map<number, number>();
    for (const id of this.idsIn(n, mine)) {
      const fine = haveBucketOf(id, nk);
      if (!mine.has(fine & (n - 1))) continue;
      const e = this.entries.get(id);
      const x = e && this.haveHash(e, without);
      if (x !== undefined) acc.set(fine, ((acc.get(fine) ?? 0) ^ x) >>> 0);
    }
    const out: number[] = [];
    buckets.forEach((b, i) => {
      for (let j = 0; j < k; j++) {
        const fine = b + j * n;
        if ((acc.get(fine) ?? 0) !== (sums[i * k + j]! >>> 0)) out.push(fine);
      }
    });
    return out;
  }

  /**
   * Where this copy's part of a cut whole-state sync ends, by task id (a restarted hub numbers its
   * tasks anew): `last`, the last task up to sync position `seq`; `next`, the first from `end` on
   * (those came as deltas). A restarted hub leaves the tasks between them out of the digest's
   * comparison and sends them; the rest of a holder cut mid-sync then still matches. Cached like
   * `have`: a pass over every entry, asked at each HANDSHAKE.
   */
  anchors(seq: number, end?: number): { last?: string; next?: string } {
    const c = this.anchorsAt;
    if (c && c.changes === this.changes && c.seq === seq && c.end === end) return c.a;
    let last: string | undefined, next: string | undefined, ls = -Infinity, ns = Infinity;
    for (const e of this.entries.values()) {
      if (!e.spec || e.seq === undefined) continue;
      if (e.seq <= seq && e.seq > ls) { ls = e.seq; last = e.id; }
      if (end !== undefined && e.seq >= end && e.seq < ns) { ns = e.seq; next = e.id; }
    }
    const a = { ...(last !== undefined ? { last } : {}), ...(next !== undefined ? { next } : {}) };
    this.anchorsAt = { changes: this.changes, seq, end, a };
    return a;
  }

  /** The summary digest: one fingerprint per bucket of ids. Equal buckets hold the same entries. */
  buckets(): number[] { this.settle(); return Array.from(this.bucketHash); }

  /** Buckets whose fingerprint differs from a peer's summary. */
  differingBuckets(theirs: number[]): number[] {
    this.settle();
    const out: number[] = [];
    for (let b = 0; b < BUCKETS; b++) if (this.bucketHash[b] !== (theirs[b] ?? 0) >>> 0) out.push(b);
    return out;
  }

  /**
   * Entry hashes of the given buckets (the detail behind a differing summary), grouped so that one
   * group holds whole buckets and at most about `maxPairs` pairs (a bucket larger than that goes alone).
   */
  bucketDigest(bs: number[], maxPairs = 5000): { bs: number[]; d: [string, number][] }[] {
    this.settle();
    const per = new Map<number, [string, number][]>();
    for (const b of bs) if (Number.isInteger(b) && b >= 0 && b < BUCKETS) per.set(b, [...this.idsIn(BUCKETS, [b])].map((id): [string, number] => [id, this.hashes.get(id)!]));
    const out: { bs: number[]; d: [string, number][] }[] = [];
    let cur: { bs: number[]; d: [string, number][] } = { bs: [], d: [] };
    for (const [b, pairs] of per) {
      if (cur.bs.length && cur.d.length + pairs.length > maxPairs) { out.push(cur); cur = { bs: [], d: [] }; }
      cur.bs.push(b);
      for (const p of pairs) cur.d.push(p);
    }
    if (cur.bs.length) out.push(cur);
    return out;
  }

  /** Like `diff`, within the given buckets. */
  diffBuckets(bs: number[], theirs: [string, number][]): { send: string[]; want: string[] } {
    this.settle();
    const t = new Map(theirs);
    const send: string[] = [];
    const want: string[] = [];
    for (const id of this.idsIn(BUCKETS, bs)) if (t.get(id) !== this.hashes.get(id)) send.push(id);
    for (const [id, h] of theirs) if (this.hashes.get(id) !== h) want.push(id);
    return { send, want };
  }

  /**
   * The values of buckets `bs` split in `k` (`validSplit`), k a bucket in order: sub-bucket j of b is
   * b + BUCKETS * j. Read from the values kept on merge: O(bs * SUB_BUCKETS), whatever the history.
   */
  subBuckets(bs: readonly number[], k: number): number[] {
    this.settle();
    const out: number[] = [];
    const m = BUCKETS * k;
    for (const b of bs) {
      for (let j = 0; j < k; j++) {
        let x = 0;
        for (let f = b + BUCKETS * j; f < FINE; f += m) x ^= this.fineHash[f]!;
        out.push(x >>> 0);
      }
    }
    return out;
  }

  /** Of a peer's `subBuckets(bs, k)` (`theirs`), the sub-buckets (b + BUCKETS * j) whose value here differs. */
  differingSubBuckets(bs: readonly number[], k: number, theirs: readonly number[]): number[] {
    const mine = this.subBuckets(bs, k);
    const out: number[] = [];
    for (let i = 0; i < bs.length; i++) for (let j = 0; j < k; j++) if (mine[i * k + j] !== (theirs[i * k + j] ?? 0) >>> 0) out.push(bs[i]! + BUCKETS * j);
    return out;
  }

  /**
   * The (id, hash) pairs of sub-buckets `subs` (of BUCKETS * k), grouped so that a group holds whole
   * sub-buckets and at most about `maxPairs` pairs: O(the entries in them).
   */
  subDigest(subs: readonly number[], k: number, maxPairs = 5000): { s: number[]; d: [string, number][] }[] {
    this.settle();
    const out: { s: number[]; d: [string, number][] }[] = [];
    let cur: { s: number[]; d: [string, number][] } = { s: [], d: [] };
    for (const s of new Set(subs)) {
      const pairs: [string, number][] = [];
      for (const id of this.idsIn(BUCKETS * k, [s])) pairs.push([id, this.hashes.get(id)!]);
      if (cur.s.length && cur.d.length + pairs.length > maxPairs) { out.push(cur); cur = { s: [], d: [] }; }
      cur.s.push(s);
      for (const p of pairs) cur.d.push(p);
    }
    if (cur.s.length) out.push(cur);
    return out;
  }

  /**
   * Like `diffBuckets`, within sub-buckets `subs` (of BUCKETS * k), `theirs` being the peer's pairs of
   * them: what to send it, what to ask it for. O(the entries in them).
   */
  diffSubs(subs: readonly number[], k: number, theirs: readonly [string, number][]): { send: string[]; want: string[] } {
    this.settle();
    const t = new Map<string, number>();
    for (const p of theirs) if (Array.isArray(p) && typeof p[0] === 'string') t.set(p[0], p[1]);
    const send: string[] = [];
    for (const id of this.idsIn(BUCKETS * k, subs)) if (t.get(id) !== this.hashes.get(id)) send.push(id);
    const want: string[] = [];
    for (const [id, h] of t) if (this.hashes.get(id) !== h) want.push(id);
    return { send, want };
  }

  /**
   * Ids whose fingerprint mod `m` (a power of two) is one of `rs`, each once, read from the finest
   * sub-buckets that hold them; past BUCKETS * SUB_BUCKETS a superset the caller filters (one finest
   * sub-bucket holds several of m). An `r` out of range holds nothing.
   */
  private *idsIn(m: number, rs: Iterable<number>): IterableIterator<string> {
    const fines = new Set<number>();
    for (const r of rs) {
      if (!Number.isInteger(r) || r < 0 || r >= m) continue;
      if (m >= FINE) fines.add(r % FINE);
      else for (let f = r; f < FINE; f += m) fines.add(f);
    }
    for (const f of fines) { const s = this.inFine[f]; if (s) yield* s; }
  }

  /** Of a peer's (id, hash) pairs, the ids whose entry here differs or is missing: O(pairs), not O(replica). */
  wanted(theirs: readonly [string, number][]): string[] {
    this.settle();
    const want: string[] = [];
    for (const p of theirs) if (Array.isArray(p) && typeof p[0] === 'string' && this.hashes.get(p[0]) !== p[1]) want.push(p[0]);
    return want;
  }

  /** Compare a peer's digest chunk with ours: what to send them, and what to ask them for. */
  diff(c: DigestChunk): { send: string[]; want: string[] } {
    this.settle();
    const theirs = new Map(c.d);
    const send: string[] = [];
    const want: string[] = [];
    for (const [id, mine] of this.hashes) {
      if (id < c.lo || id >= c.hi) continue;
      const h = theirs.get(id);
      if (h === undefined || h !== mine) send.push(id);
    }
    for (const [id, h] of c.d) {
      const mine = this.hashes.get(id);
      if (mine === undefined || mine !== h) want.push(id);
    }
    return { send, want };
  }

  /** Entries for `ids`, in chunks of at most `maxBytes` (an entry larger than that goes alone). */
  chunk(ids: string[], maxBytes: number): Entry[][] { return this.chunkUpTo(ids, maxBytes).chunks; }

  /**
   * Like `chunk`, stopping before `budget` bytes in all (one entry at least): `cut` if some were left
   * out. An answer bounded so, below the transport's send buffer, is not dropped whole on a catch-up.
   */
  chunkUpTo(ids: string[], maxBytes: number, budget = Infinity): { chunks: Entry[][]; cut: boolean; bytes: number } {
    const out: Entry[][] = [];
    let cur: Entry[] = [];
    let size = 0, total = 0;
    for (const id of ids) {
      const e = this.get(id);
      if (!e) continue;
      const s = JSON.stringify(e).length;
      if (total > 0 && total + s > budget) { if (cur.length > 0) out.push(cur); return { chunks: out, cut: true, bytes: total }; }
      if (cur.length > 0 && size + s > maxBytes) { out.push(cur); cur = []; size = 0; }
      cur.push(e); size += s; total += s;
    }
    if (cur.length > 0) out.push(cur);
    return { chunks: out, cut: false, bytes: total };
  }
}
