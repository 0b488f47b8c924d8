import { IdRing, asciiHash } from '../protocol/id-ring.js';
import { DEFAULT_RETAIN, type RetainOptions } from './retention.js';

/** Where an evicted task's archive line is, and when it left the hot state. */
export interface Tombstone { file: number; offset: number; at: number; /** When the task was accepted, where known (evicted by this hub). */ acc?: number }

/**
 * Evicted ids, remembered for the duplicate window after they leave the hot state (as JetStream
 * remembers message ids for its duplicate window): resubmitting one is a duplicate that answers
 * with the archived result, and a handback cannot bring it back as new work. Bounded in age (the
 * horizon's age after eviction) and count (`cap`), so it does not grow with the swarm's age.
 *
 * Its memory does not grow as it fills either: the ids in a ring allocated at its bound
 * (protocol/id-ring.ts) and, beside each slot, its archive place and its eviction and acceptance
 * times in typed arrays, all written through once, when the first id arrives (about 85 bytes an id
 * at the bound, instead of a Map entry, a string and an object: about 175 bytes an id, paid as the
 * window filled). A store that never evicts allocates nothing.
 */
export class Tombstones {
  /** At most this many ids: the horizon's count, and never fewer than the default's. */
  readonly cap: number;
  /** The latest acceptance time among the ids forgotten since the hub started (that had one). */
  forgottenAccepted = 0;
  private readonly ring: IdRing;
  private p?: Places;

  constructor(private readonly opts: RetainOptions) {
    this.cap = Math.max(opts.count, DEFAULT_RETAIN.count);
    this.ring = new IdRing(this.cap, 0, (cap) => {
      const p: Places = { file: new Uint32Array(cap), off: new Float64Array(cap), at: new Float64Array(cap), acc: new Float64Array(cap) };
      this.p = p;
      return [p.file, p.off, p.at, p.acc];
    });
  }

  get size(): number { return this.ring.size; }
  has(id: string): boolean { return this.ring.has(id); }

  get(id: string): Tombstone | undefined {
    const i = this.ring.find(id);
    if (i < 0) return undefined;
    const p = this.p!;
    const acc = p.acc[i]!;
    return { file: p.file[i]!, offset: p.off[i]!, at: p.at[i]!, ...(Number.isNaN(acc) ? {} : { acc }) };
  }

  add(id: string, t: Tombstone): void { this.put(id, t.file, t.offset, t.at, t.acc); }

  /** `add` without a Tombstone object (replay puts every id of the window). */
  put(id: string, file: number, offset: number, at: number, acc = NaN): void {
    this.ring.delete(id);
    if (this.ring.full) this.dropOldest();
    const i = this.ring.push(id);
    const p = this.p!;
    p.file[i] = file; p.off[i] = offset; p.at[i] = at; p.acc[i] = acc;
  }

  /**
   * `put` for an id given as its bytes `buf[start, end)` (UTF-8, as a journal line holds it): no
   * string is made unless the id is not ASCII or longer than a slot holds.
   */
  putBytes(buf: Buffer, start: number, end: number, file: number, offset: number, at: number): void {
    const h = asciiHash(buf, start, end);
    if (h < 0) { this.put(buf.toString('utf8', start, end), file, offset, at); return; }
    this.ring.deleteAscii(buf, start, end, h);
    if (this.ring.full) this.dropOldest();
    const i = this.ring.pushAscii(buf, start, end, h);
    const p = this.p!;
    p.file[i] = file; p.off[i] = offset; p.at[i] = at; p.acc[i] = NaN;
  }

  /** Forget ids evicted longer ago than the window (one evicted exactly at the horizon stays). */
  prune(now: number): void {
    const cutoff = now - this.opts.ageMs;
    for (let i = this.ring.oldest(); i >= 0 && this.p!.at[i]! < cutoff; i = this.ring.oldest()) this.dropOldest();
  }

  /** Consecutive runs with one archive file and one eviction time, oldest first (the snapshot's evict records). */
  *groups(max = 10_000): Iterable<{ file: number; at: number; ids: string[]; offsets: number[] }> {
    const p = this.p;
    if (!p) return;
    let cur: { file: number; at: number; ids: string[]; offsets: number[] } | undefined;
    for (const i of this.ring.slots()) {
      const file = p.file[i]!, at = p.at[i]!;
      if (!cur || cur.file !== file || cur.at !== at || cur.ids.length >= max) {
        if (cur) yield cur;
        cur = { file, at, ids: [], offsets: [] };
      }
      cur.ids.push(this.ring.idAt(i));
      cur.offsets.push(p.off[i]!);
    }
    if (cur) yield cur;
  }

  private dropOldest(): void {
    const i = this.ring.oldest();
    if (i >= 0 && this.ring.isLive(i)) {
      const acc = this.p!.acc[i]!;
      if (!Number.isNaN(acc) && acc > this.forgottenAccepted) this.forgottenAccepted = acc;
    }
    this.ring.dropOldest();
  }
}

/** Per slot of the ring: the archive file and offset of the id's line, its eviction and acceptance times (NaN: unknown). */
interface Places { file: Uint32Array; off: Float64Array; at: Float64Array; acc: Float64Array }
