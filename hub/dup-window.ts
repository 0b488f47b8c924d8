import { DEFAULT_RETAIN, type RetainOptions } from './retention.js';

/** Where an evicted task's archive line is, and when it left the hot state. */
export interface Tombstone { file: number; offset: number; at: number; /** When the task was accepted, where known (evicted by this hub). */ acc?: number }

/** Bytes of an id kept in its slot; a longer id (UTF-8) is kept in a side map. A UUID fits. */
const ID_BYTES = 40;
const LONG = 0xffff;
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Evicted ids, remembered for the duplicate window after they leave the hot state (as JetStream
 * remembers message ids for its duplicate window): resubmitting one is a duplicate that answers
 * with the archived result, and a handback cannot bring it back as new work. Bounded in age (the
 * horizon's age after eviction) and count (`cap`), so it does not grow with the swarm's age.
 *
 * Its memory does not grow as it fills either: a ring of `cap` fixed-width slots in typed arrays
 * (the id's bytes, its archive place, the eviction and acceptance times) and an open-addressing
 * index over them, allocated and written through once, when the first id arrives (about 85 bytes
 * an id at the bound, instead of a Map entry, a string and an object: about 175 bytes an id, paid
 * as the window filled). A store that never evicts allocates nothing. Ids keep their bytes, so a
 * lookup is exact (no hash false positives).
 */
export class Tombstones {
  /** At most this many ids: the horizon's count, and never fewer than the default's. */
  readonly cap: number;
  /** The latest acceptance time among the ids forgotten since the hub started (that had one). */
  forgottenAccepted = 0;
  private live = 0;
  /** Ring: slots in eviction order from `head`, `used` of them (a slot whose id was added again since is dead). */
  private head = 0;
  private used = 0;
  private s?: Slots;
  /** Ids longer than a slot holds, by slot. */
  private readonly long = new Map<number, string>();
  private readonly scratch = Buffer.allocUnsafe(4 * 128 + 16);

  constructor(private readonly opts: RetainOptions) { this.cap = Math.max(opts.count, DEFAULT_RETAIN.count); }

  get size(): number { return this.live; }
  has(id: string): boolean { return this.find(id) >= 0; }

  get(id: string): Tombstone | undefined {
    const i = this.find(id);
    if (i < 0) return undefined;
    const s = this.s!;
    const acc = s.acc[i]!;
    return { file: s.file[i]!, offset: s.off[i]!, at: s.at[i]!, ...(Number.isNaN(acc) ? {} : { acc }) };
  }

  add(id: string, t: Tombstone): void {
    const s = (this.s ??= allocate(this.cap));
    const old = this.find(id);
    if (old >= 0) this.kill(old);
    if (this.used === this.cap) this.dropOldest();
    const i = (this.head + this.used) % this.cap;
    this.used++;
    const n = this.encode(id);
    if (n > ID_BYTES) { s.len[i] = LONG; this.long.set(i, id); } else { s.len[i] = n; this.scratch.copy(s.ids, i * ID_BYTES, 0, n); }
    s.file[i] = t.file; s.off[i] = t.offset; s.at[i] = t.at; s.acc[i] = t.acc ?? NaN;
    const h = hash(id);
    s.hash[i] = h;
    s.dead[i] = 0;
    let p = h & s.mask;
    while (s.index[p] !== 0) p = (p + 1) & s.mask;
    s.index[p] = i + 1;
    this.live++;
  }

  /** Forget ids evicted longer ago than the window (one evicted exactly at the horizon stays). */
  prune(now: number): void {
    const cutoff = now - this.opts.ageMs;
    while (this.used > 0 && this.s!.at[this.head]! < cutoff) this.dropOldest();
  }

  /** Consecutive runs with one archive file and one eviction time, oldest first (the snapshot's evict records). */
  *groups(max = 10_000): Iterable<{ file: number; at: number; ids: string[]; offsets: number[] }> {
    const s = this.s;
    if (!s) return;
    let cur: { file: number; at: number; ids: string[]; offsets: number[] } | undefined;
    for (let k = 0; k < this.used; k++) {
      const i = (this.head + k) % this.cap;
      if (s.dead[i]) continue;
      const file = s.file[i]!, at = s.at[i]!;
      if (!cur || cur.file !== file || cur.at !== at || cur.ids.length >= max) {
        if (cur) yield cur;
        cur = { file, at, ids: [], offsets: [] };
      }
      cur.ids.push(this.idAt(i));
      cur.offsets.push(s.off[i]!);
    }
    if (cur) yield cur;
  }

  private dropOldest(): void {
    const i = this.head, s = this.s!;
    if (!s.dead[i]) {
      const acc = s.acc[i]!;
      if (!Number.isNaN(acc) && acc > this.forgottenAccepted) this.forgottenAccepted = acc;
      this.kill(i);
    }
    this.head = (this.head + 1) % this.cap;
    this.used--;
  }

  /** Take slot `i` out of the index (backward-shift deletion: no deleted markers to skip later). */
  private kill(i: number): void {
    const s = this.s!;
    s.dead[i] = 1;
    this.long.delete(i);
    this.live--;
    let p = s.hash[i]! & s.mask;
    while (s.index[p] !== i + 1) p = (p + 1) & s.mask;
    for (let j = (p + 1) & s.mask; s.index[j] !== 0; j = (j + 1) & s.mask) {
      const home = s.hash[s.index[j]! - 1]! & s.mask;
      // The entry at j may fill the hole at p unless its home lies cyclically in (p, j].
      if (((j - home) & s.mask) >= ((j - p) & s.mask)) { s.index[p] = s.index[j]!; p = j; }
    }
    s.index[p] = 0;
  }

  /** The slot holding `id`, or -1. */
  private find(id: string): number {
    const s = this.s;
    if (!s || this.live === 0) return -1;
    const h = hash(id);
    let n = -1;
    for (let p = h & s.mask; s.index[p] !== 0; p = (p + 1) & s.mask) {
      const i = s.index[p]! - 1;
      if (s.hash[i] !== h) continue;
      if (s.len[i] === LONG) { if (this.long.get(i) === id) return i; continue; }
      if (n < 0) n = this.encode(id);
      if (s.len[i] === n && this.scratch.compare(s.ids, i * ID_BYTES, i * ID_BYTES + n, 0, n) === 0) return i;
    }
    return -1;
  }

  /**
   * The id's UTF-8 bytes into `scratch` if it fits a slot; their count. An id with a UTF-16 surrogate
   * counts as long: a lone one encodes as U+FFFD, so its bytes would neither tell it from another id
   * nor give it back.
   */
  private encode(id: string): number {
    if (SURROGATE.test(id)) return Infinity;
    const n = Buffer.byteLength(id);
    if (n <= ID_BYTES) this.scratch.write(id, 0, 'utf8');
    return n;
  }

  private idAt(i: number): string {
    const s = this.s!;
    return s.len[i] === LONG ? this.long.get(i)! : s.ids.toString('utf8', i * ID_BYTES, i * ID_BYTES + s.len[i]!);
  }
}

interface Slots {
  ids: Buffer; len: Uint16Array; hash: Uint32Array; dead: Uint8Array;
  file: Uint32Array; off: Float64Array; at: Float64Array; acc: Float64Array;
  /** Slot + 1 by hash, 0 empty; at least twice the slots, so probes stay short. */
  index: Uint32Array; mask: number;
}

/** Every array at its bound, each written through once so its pages are resident now, not as the window fills. */
function allocate(cap: number): Slots {
  let size = 1;
  while (size < 2 * cap) size *= 2;
  const s: Slots = {
    ids: Buffer.alloc(cap * ID_BYTES), len: new Uint16Array(cap), hash: new Uint32Array(cap), dead: new Uint8Array(cap),
    file: new Uint32Array(cap), off: new Float64Array(cap), at: new Float64Array(cap), acc: new Float64Array(cap),
    index: new Uint32Array(size), mask: size - 1,
  };
  for (const a of [s.ids, s.len, s.hash, s.dead, s.file, s.off, s.at, s.acc, s.index]) a.fill(1).fill(0);
  return s;
}

/** FNV-1a over the id's UTF-16 units, mixed at the end so the low bits (the index's) spread. */
function hash(id: string): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < id.length; k++) h = Math.imul(h ^ id.charCodeAt(k), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}
