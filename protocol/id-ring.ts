/**
 * A bounded set of ids in insertion order, its memory fixed at its bound: a ring of `cap` fixed-width
 * slots in typed arrays (the id's UTF-8 bytes, their length, the id's hash, a dead mark) and an
 * open-addressing index over them. Past the bound the oldest slot is reused. Ids keep their bytes,
 * so a lookup is exact (no hash false positives). About 57 bytes an id at the bound, instead of a Set
 * entry, a string and an order array's slot (70 to 100 bytes an id, paid as it filled).
 *
 * Nothing is allocated until the first id arrives; then every array is allocated at the bound, and
 * written through (its pages resident) once `residentAt` ids are held: at once for the hub's
 * duplicate window, which fills; later for a replica, most of whose members remember only the few
 * evicted ids they held themselves. Either way the memory does not grow with the swarm's age after
 * that. A slot is addressed by its index: a caller keeps per-id data in parallel arrays of `cap`.
 */

/** Bytes of an id kept in its slot; a longer id (UTF-8) is kept in a side map. A UUID fits. */
const ID_BYTES = 40;
const LONG = 0xffff;
const SURROGATE = /[\uD800-\uDFFF]/;

interface Slots {
  ids: Buffer; len: Uint16Array; hash: Uint32Array; dead: Uint8Array;
  /** Slot + 1 by hash, 0 empty; at least twice the slots, so probes stay short. */
  index: Uint32Array; mask: number;
}

export class IdRing {
  private live = 0;
  /** Slots in insertion order from `head`, `used` of them (a slot whose id was removed since is dead). */
  private head = 0;
  private used = 0;
  private s?: Slots;
  private resident = false;
  /** The caller's parallel arrays (`onAllocate`), written through with the ring's. */
  private extra: ArrayBufferView[] = [];
  /** Ids longer than a slot holds, by slot. */
  private readonly long = new Map<number, string>();
  private readonly scratch = Buffer.allocUnsafe(4 * 128 + 16);

  /**
   * @param cap at most this many slots (live or dead).
   * @param residentAt write every page through once this many slots are used (0: when allocated).
   * @param onAllocate called once, when the ring allocates (a caller's parallel arrays, written through alike).
   */
  constructor(readonly cap: number, private readonly residentAt = 0, private readonly onAllocate?: (cap: number) => ArrayBufferView[]) {}

  /** Ids held. */
  get size(): number { return this.live; }
  /** Slots in use, dead ones included (at most `cap`). */
  get slotsUsed(): number { return this.used; }
  get full(): boolean { return this.used === this.cap; }
  /** Bytes of the ring's arrays (none before the first id; then fixed), the caller's parallel ones not counted. */
  get bytes(): number {
    const s = this.s;
    return s ? s.ids.byteLength + s.len.byteLength + s.hash.byteLength + s.dead.byteLength + s.index.byteLength : 0;
  }
  has(id: string): boolean { return this.find(id) >= 0; }

  /** The oldest slot (live or dead), or -1 if none. */
  oldest(): number { return this.used > 0 ? this.head : -1; }
  isLive(slot: number): boolean { return !this.s!.dead[slot]; }

  /** Append `id` (not held: see `find`) as the newest; the oldest slot goes first if the ring is full. Its slot. */
  push(id: string): number {
    const s = this.s ?? this.allocate();
    if (this.used === this.cap) this.dropOldest();
    const i = (this.head + this.used) % this.cap;
    this.used++;
    if (!this.resident && this.used >= this.residentAt) this.touch();
    const n = this.encode(id);
    if (n > ID_BYTES) { s.len[i] = LONG; this.long.set(i, id); } else { s.len[i] = n; this.scratch.copy(s.ids, i * ID_BYTES, 0, n); }
    return this.place(i, hash(id));
  }

  /**
   * `push` for an id given as its bytes `buf[start, end)`, ASCII and at most ID_BYTES of them, with
   * `h` from `asciiHash` (replay puts the duplicate window's ids from the journal's bytes: no string).
   */
  pushAscii(buf: Uint8Array, start: number, end: number, h: number): number {
    const s = this.s ?? this.allocate();
    if (this.used === this.cap) this.dropOldest();
    const i = (this.head + this.used) % this.cap;
    this.used++;
    if (!this.resident && this.used >= this.residentAt) this.touch();
    const at = i * ID_BYTES;
    for (let k = start; k < end; k++) s.ids[at + k - start] = buf[k]!;
    s.len[i] = end - start;
    return this.place(i, h);
  }

  /** `delete` for an id as `pushAscii` takes it. */
  deleteAscii(buf: Uint8Array, start: number, end: number, h: number): boolean {
    const s = this.s;
    if (!s || this.live === 0) return false;
    const n = end - start;
    for (let p = h & s.mask; s.index[p] !== 0; p = (p + 1) & s.mask) {
      const i = s.index[p]! - 1;
      if (s.hash[i] !== h || s.len[i] !== n) continue;
      let k = 0;
      const at = i * ID_BYTES;
      while (k < n && s.ids[at + k] === buf[start + k]) k++;
      if (k === n) { this.kill(i); return true; }
    }
    return false;
  }

  /** Slot `i` (its id's bytes written) takes hash `h` and its place in the index. */
  private place(i: number, h: number): number {
    const s = this.s!;
    s.hash[i] = h;
    s.dead[i] = 0;
    let p = h & s.mask;
    while (s.index[p] !== 0) p = (p + 1) & s.mask;
    s.index[p] = i + 1;
    this.live++;
    return i;
  }

  /** Free the oldest slot (forgetting its id if it was live); false if there is none. */
  dropOldest(): boolean {
    if (this.used === 0) return false;
    const i = this.head;
    if (!this.s!.dead[i]) this.kill(i);
    this.head = (this.head + 1) % this.cap;
    this.used--;
    return true;
  }

  /** Forget `id` if held (its slot stays, dead, until the oldest reaches it); true if it was. */
  delete(id: string): boolean {
    const i = this.find(id);
    if (i < 0) return false;
    this.kill(i);
    return true;
  }

  /** Live slots, oldest first. */
  *slots(): Iterable<number> {
    const s = this.s;
    if (!s) return;
    for (let k = 0; k < this.used; k++) {
      const i = (this.head + k) % this.cap;
      if (!s.dead[i]) yield i;
    }
  }

  idAt(i: number): string {
    const s = this.s!;
    return s.len[i] === LONG ? this.long.get(i)! : s.ids.toString('utf8', i * ID_BYTES, i * ID_BYTES + s.len[i]!);
  }

  /** The slot holding `id`, or -1. */
  find(id: string): number {
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

  /** Every array at the bound; zeroed pages stay unbacked until written (see `touch`). */
  private allocate(): Slots {
    let size = 1;
    while (size < 2 * this.cap) size *= 2;
    const cap = this.cap;
    this.s = {
      ids: Buffer.alloc(cap * ID_BYTES), len: new Uint16Array(cap), hash: new Uint32Array(cap), dead: new Uint8Array(cap),
      index: new Uint32Array(size), mask: size - 1,
    };
    this.extra = this.onAllocate?.(cap) ?? [];
    return this.s;
  }

  /** Write every page through once, so they are resident now rather than as the ring fills (contents kept). */
  private touch(): void {
    this.resident = true;
    const s = this.s!;
    for (const a of [s.ids, s.len, s.hash, s.dead, s.index, ...this.extra]) {
      const b = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
      for (let k = 0; k < b.length; k += 4096) b[k] = b[k]!; // a write per page: keeps what is there
    }
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
}

/** FNV-1a over the id's UTF-16 units, mixed at the end so the low bits (the index's) spread. */
function hash(id: string): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < id.length; k++) h = Math.imul(h ^ id.charCodeAt(k), 0x01000193);
  return mix(h);
}

/**
 * The hash `hash` gives the id whose UTF-8 bytes are `buf[start, end)`, if they are ASCII (one byte a
 * UTF-16 unit) and fit a slot (IdRing.pushAscii); else -1 (the caller goes by the id's string).
 */
export function asciiHash(buf: Uint8Array, start: number, end: number): number {
  if (end - start > ID_BYTES) return -1;
  let h = 0x811c9dc5;
  for (let k = start; k < end; k++) {
    const c = buf[k]!;
    if (c > 0x7f) return -1;
    h = Math.imul(h ^ c, 0x01000193);
  }
  return mix(h);
}

function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}
