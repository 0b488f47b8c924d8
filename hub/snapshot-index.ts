import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import type { JournalRecord, LazyLine, RawLine } from './journal-record.js';
import type { LazyEvict } from './journal-evict.js';
import { lineReader, type ReadFile, type ReplayState } from './journal-files.js';

/**
 * The snapshot's index, `snapshot.idx`, written beside `snapshot.ndjson` by each compaction
 * (docs/journal.md, "The snapshot index"). The snapshot stays the same NDJSON (jq, older readers and
 * a downgrade read it as before); the index says where its lines are and what they are, and holds a
 * CRC-32 of each range of whole lines (about 1 MiB, as the writer's pieces went out). A replay that
 * finds the index whole and the snapshot its size checks each range with one native CRC-32 call and
 * takes each task from its entry (id, times, where its task and result lines lie), instead of
 * scanning and checking every line in JavaScript: most of a restart's CPU on a large hot state.
 *
 * The index is derived data, never trusted alone: an index that is missing, damaged, or written for
 * another snapshot (a compaction killed between the two renames, an older swarm's compaction since)
 * is ignored and the snapshot is read line by line as before; a range whose CRC-32 does not hold is
 * read line by line (each line's own check finds and reports the damage, as before).
 *
 * Layout (little-endian): `SWSIDX3\n`, f64 snapshot bytes, u32 ranges; per range u32 bytes, u32
 * CRC-32, u32 entries, u32 entry bytes, then its entries; a u32 CRC-32 of everything before it last.
 * Entries, offsets from the range's start, lengths without the newline:
 * - 1 task: u32 offset, u32 length, u16 id bytes, u8 ASCII, f64 accepted at (its id starts at TASK_HEAD's end);
 * - 2 task and result: the same, then u32 offset, u32 length, f64 finished at of its result line,
 *   u32 the bytes of its texts retention counts (hub/retention-bytes.ts `taskBytes` less its fixed
 *   RECORD_BYTES, which a later build may measure anew), 0xffffffff if not known;
 * - 3 line: u32 offset, u32 length (any other record, read as the segment's lines are);
 * - 4 evict: u32 offset, u32 length, u32 ids, f64 file, f64 at, u8 flags (1 end, 2 floor), f64 end,
 *   f64 floor, then i32 x ids where each id starts in the line, i32 x ids where it ends, f64 x ids
 *   archive offsets: the duplicate window's ids go from the line's bytes to its ring with no id parsed
 *   (100,000 at the default horizon, parsed one by one in JavaScript: a third of a cold replay of
 *   the snapshot).
 */
const MAGIC = Buffer.from('SWSIDX3\n');
const HEADER = MAGIC.length + 8 + 4;
const TASK = 1, DONE = 2, LINE = 3, EVICT = 4;
const EVICT_HEAD = '{"t":"evict","ids":[';
/** Typed arrays copied from the index are in the platform's byte order: little-endian only. */
const LE = os.endianness() === 'LE';
/** Where a task line's id starts: the writer's form, `{"t":"task","spec":{"id":"` (journal-record.ts decodeLazy). */
const ID_AT = '{"t":"task","spec":{"id":"'.length;
/** An id the task line holds as it is (nothing JSON escapes): its bytes are the id's UTF-8. */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** What a compaction yields for a task the index can describe: its task line and its result line, if done. */
export interface SnapshotTask { t: 'indexed-task'; id: string; at: number; task: JournalRecord | RawLine; result?: JournalRecord | RawLine; resultAt: number; /** Retention's bytes of its texts when done, or -1. */ bytes: number }

/** True when `id` can stand in an index entry (its task line holds its bytes unescaped). */
export const indexableId = (id: string): boolean => !ESCAPED.test(id);

/** A task read from the index (valid until the next call): its task line, and its result line when `resultEnd` >= 0. */
export interface IndexedTask extends RawLine { id: string; at: number; resultStart: number; resultEnd: number; resultAt: number; /** Retention's bytes of its texts (done), or -1. */ bytes: number }

/** A growing byte buffer for the index, written through a DataView (a Buffer's write methods check each call). */
class Bytes {
  buf = Buffer.allocUnsafe(1 << 20);
  v = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  n = 0;
  /** `k` bytes more; where they start (the buffer may be replaced: take `v` after). */
  room(k: number): number {
    if (this.n + k > this.buf.length) {
      const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.n + k));
      this.buf.copy(b, 0, 0, this.n);
      this.buf = b;
      this.v = new DataView(b.buffer, b.byteOffset, b.length);
    }
    const at = this.n;
    this.n += k;
    return at;
  }
}

/**
 * The index as a compaction writes its snapshot: each line is described (`line`, `task`, `result`,
 * `evict`) as it is queued, then `wrote` is told where a batch of lines went (their starts) and in
 * which pieces (each piece whole lines, as WriteBuffer.pieces makes them); `finish` gives the file.
 */
export class IndexWriter {
  private readonly out = new Bytes();
  private ranges = 0;
  private bytes = 0;
  /** Queued lines: kind (0 line, 1 task, 2 its result, 3 evict) + 4 x ASCII + 8 x id bytes; their times; evict records by line. */
  private desc: number[] = [];
  private at: number[] = [];
  private evicts = new Map<number, Extract<JournalRecord, { t: 'evict' }>>();

  /** A line replay reads as the segment's (meta, failure, anything unusual). */
  line(): void { this.desc.push(0); this.at.push(0); }
  /** A task line in the writer's form, its id unescaped. */
  task(id: string, at: number): void {
    const n = Buffer.byteLength(id, 'utf8');
    // The entry holds the id's length in 16 bits (an id longer goes as a line, with its task).
    if (n > 0xffff) { this.line(); return; }
    this.desc.push(1 | (n === id.length ? 4 : 0) | (n * 8));
    this.at.push(at);
  }
  /** The result line right after the task line; `bytes`: retention's for the task, or -1. */
  result(at: number, bytes: number): void { this.desc.push(2 + 8 * (bytes >= 0 && bytes < UNKNOWN ? bytes : UNKNOWN)); this.at.push(at); }
  /**
   * An evict record, encoded as `line`: described with its ids' places when every id is ASCII and
   * unescaped (their places in the line follow from their lengths), else as a line.
   */
  evict(r: Extract<JournalRecord, { t: 'evict' }>, line: string): void {
    let q = EVICT_HEAD.length;
    for (const id of r.ids) {
      if (!indexableId(id) || Buffer.byteLength(id) !== id.length) { this.line(); return; }
      q += id.length + 3;
    }
    // The ids end where the line says they do, or (another key order, say) it goes as a line.
    if (!line.startsWith(EVICT_HEAD) || line.charCodeAt(r.ids.length ? q - 1 : q) !== 0x5d) { this.line(); return; }
    this.evicts.set(this.desc.length, r);
    this.desc.push(3);
    this.at.push(0);
  }

  /**
   * The queued lines went out: line i starts `starts[i]` bytes after this batch's first, the batch
   * was `pieces` (their lengths and CRC-32s, in order) and `total` bytes long.
   */
  wrote(starts: readonly number[], pieces: readonly { len: number; crc: number }[], total: number): void {
    const o = this.out;
    const { desc, at } = this;
    let i = 0, pieceStart = 0;
    const n = desc.length;
    for (const p of pieces) {
      const pieceEnd = pieceStart + p.len;
      const head = o.room(16);
      o.v.setUint32(head, p.len, true);
      o.v.setUint32(head + 4, p.crc, true);
      const entriesFrom = o.n;
      let count = 0;
      for (; i < n && starts[i]! < pieceEnd; i++) {
        const s = starts[i]! - pieceStart;
        const len = (i + 1 < n ? starts[i + 1]! : total) - starts[i]! - 1;
        const d = desc[i]!, k = d & 3;
        count++;
        if (k === 3) { this.writeEvict(s, len, this.evicts.get(i)!); continue; }
        if (k !== 1) {
          const e = o.room(9), v = o.v;
          v.setUint8(e, LINE); v.setUint32(e + 1, s, true); v.setUint32(e + 5, len, true);
          continue;
        }
        const paired = i + 1 < n && (desc[i + 1]! & 3) === 2 && starts[i + 1]! < pieceEnd;
        const e = o.room(paired ? 40 : 20), v = o.v;
        v.setUint8(e, paired ? DONE : TASK); v.setUint32(e + 1, s, true); v.setUint32(e + 5, len, true);
        v.setUint16(e + 9, d >>> 3, true); v.setUint8(e + 11, d & 4 ? 1 : 0); v.setFloat64(e + 12, at[i]!, true);
        if (!paired) continue;
        i++;
        v.setUint32(e + 20, starts[i]! - pieceStart, true);
        v.setUint32(e + 24, (i + 1 < n ? starts[i + 1]! : total) - starts[i]! - 1, true);
        v.setFloat64(e + 28, at[i]!, true);
        v.setUint32(e + 36, Math.floor(desc[i]! / 8), true);
      }
      o.v.setUint32(head + 8, count, true);
      o.v.setUint32(head + 12, o.n - entriesFrom, true);
      pieceStart = pieceEnd;
      this.ranges++;
    }
    this.bytes += total;
    this.desc = []; this.at = []; this.evicts.clear();
  }

  private writeEvict(s: number, len: number, r: Extract<JournalRecord, { t: 'evict' }>): void {
    const o = this.out;
    const n = r.ids.length;
    const e = o.room(46 + 16 * n), v = o.v;
    v.setUint8(e, EVICT); v.setUint32(e + 1, s, true); v.setUint32(e + 5, len, true); v.setUint32(e + 9, n, true);
    v.setFloat64(e + 13, r.file, true); v.setFloat64(e + 21, r.at, true);
    v.setUint8(e + 29, (r.end !== undefined ? 1 : 0) | (r.floor !== undefined ? 2 : 0));
    v.setFloat64(e + 30, r.end ?? 0, true); v.setFloat64(e + 38, r.floor ?? 0, true);
    const starts = e + 46, ends = starts + 4 * n, offs = ends + 4 * n;
    let q = EVICT_HEAD.length;
    for (let i = 0; i < n; i++) {
      const id = r.ids[i]!;
      v.setInt32(starts + 4 * i, q + 1, true);
      v.setInt32(ends + 4 * i, q + 1 + id.length, true);
      v.setFloat64(offs + 8 * i, r.offsets[i] ?? -1, true);
      q += id.length + 3;
    }
  }

  /** The index file's bytes, for a snapshot of the bytes written so far. */
  finish(): Buffer {
    const head = Buffer.allocUnsafe(HEADER);
    MAGIC.copy(head, 0);
    head.writeDoubleLE(this.bytes, MAGIC.length);
    head.writeUInt32LE(this.ranges, MAGIC.length + 8);
    const body = this.out.buf.subarray(0, this.out.n);
    const tail = Buffer.allocUnsafe(4);
    tail.writeUInt32LE(crc32(body, crc32(head)), 0);
    return Buffer.concat([head, body, tail]);
  }
}

/** The sinks replay reads a snapshot into (Journal.open's). */
export interface SnapshotSinks {
  sink?: (r: JournalRecord) => void;
  lazy?: (l: LazyLine | LazyEvict) => void;
  indexed?: (t: IndexedTask) => void;
}

const scratch: IndexedTask = { id: '', at: 0, buf: Buffer.alloc(0), start: 0, end: 0, resultStart: 0, resultEnd: -1, resultAt: 0, bytes: -1 };
const UNKNOWN = 0xffffffff;

/**
 * The snapshot read through its index: what readJournalFile gives (`partial` if some range was read
 * line by line), or `absent` (no index, or one that is not whole) or `stale` (whole, but not this
 * snapshot's), for which the caller reads the snapshot line by line. Nothing has gone to the sinks then.
 */
export function readIndexedSnapshot(file: string, indexFile: string, seen: ReplayState, sinks: SnapshotSinks): (ReadFile & { partial?: true }) | 'absent' | 'stale' {
  let idx: Buffer;
  try { idx = fs.readFileSync(indexFile); } catch { return 'absent'; }
  if (idx.length < HEADER + 4 || idx.compare(MAGIC, 0, MAGIC.length, 0, MAGIC.length) !== 0) return 'absent';
  if (crc32(idx.subarray(0, idx.length - 4)) !== idx.readUInt32LE(idx.length - 4)) return 'absent';
  const size = idx.readDoubleLE(MAGIC.length);
  const ranges = idx.readUInt32LE(MAGIC.length + 8);
  // The ranges must tile the index and the snapshot exactly, before anything is replayed.
  let p = HEADER, sum = 0;
  for (let r = 0; r < ranges; r++) {
    if (p + 16 > idx.length - 4) return 'absent';
    sum += idx.readUInt32LE(p);
    p += 16 + idx.readUInt32LE(p + 12);
  }
  if (p !== idx.length - 4) return 'absent';
  let fd: number;
  try { fd = fs.openSync(file, 'r'); } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'stale';
    throw e;
  }
  try {
    if (fs.fstatSync(fd).size !== size || sum !== size) return 'stale';
    // `partial`: some range was read line by line (damage, or an index of another snapshot of this length).
    const out: ReadFile & { partial?: true } = { records: [], damage: [], legacy: 0, size, goodEnd: size };
    const name = path.basename(file);
    const trusted = lineReader(name, out, seen, sinks.sink, sinks.lazy, true);
    const checked = lineReader(name, out, seen, sinks.sink, sinks.lazy);
    // Ranges whose CRC-32 failed, next to each other, are read line by line as one span (a line may cross between them).
    let bad: Buffer[] = [];
    let badAt = 0;
    const flushBad = (): void => {
      if (!bad.length) return;
      out.partial = true;
      const buf = bad.length === 1 ? bad[0]! : Buffer.concat(bad);
      bad = [];
      splitLines(buf, 0, badAt, checked);
    };
    const v = new DataView(idx.buffer, idx.byteOffset, idx.length);
    let at = 0;
    p = HEADER;
    for (let r = 0; r < ranges; r++) {
      const len = v.getUint32(p, true), crc = v.getUint32(p + 4, true), count = v.getUint32(p + 8, true), ebytes = v.getUint32(p + 12, true);
      p += 16;
      const next = p + ebytes;
      // A buffer per range, as the segment's chunks: a task's lines stay where they were read (hub/replayed.ts).
      const buf = Buffer.allocUnsafe(len);
      for (let got = 0; got < len;) {
        const n = fs.readSync(fd, buf, got, len - got, at + got);
        if (n === 0) throw new Error(`${name} ended at ${at + got} of ${size} bytes while it was read`);
        got += n;
      }
      if (crc32(buf) !== crc) {
        if (!bad.length) badAt = at;
        bad.push(buf);
        at += len;
        p = next;
        continue;
      }
      flushBad();
      // The entries tile the range, line after line, each ending at its newline. Should one not (a
      // writer's bug: the range's CRC-32 held), the rest of the range is read line by line.
      let want = 0;
      for (let e = 0; e < count; e++) {
        const kind = idx[p]!;
        const s = v.getUint32(p + 1, true), l = v.getUint32(p + 5, true);
        const esize = kind === LINE ? 9 : kind === TASK ? 20 : kind === DONE ? 40 : kind === EVICT && p + 13 <= next ? 46 + 16 * v.getUint32(p + 9, true) : 0;
        const done = kind === DONE;
        const rs = done ? v.getUint32(p + 20, true) : 0, rl = done ? v.getUint32(p + 24, true) : 0;
        if (!esize || p + esize > next || s !== want || s + l >= len || buf[s + l] !== 10 || (done && (rs !== s + l + 1 || rs + rl >= len || buf[rs + rl] !== 10))) break;
        want = done ? rs + rl + 1 : s + l + 1;
        if (kind === LINE) { trusted(buf, s, s + l, at + s); p += 9; continue; }
        if (kind === EVICT) { p = evictEntry(idx, v, p, buf, s, l, at, trusted, seen, sinks.lazy); continue; }
        const idLen = v.getUint16(p + 9, true), ascii = idx[p + 11] === 1, t = v.getFloat64(p + 12, true);
        const rat = done ? v.getFloat64(p + 28, true) : 0;
        const bytes = done ? v.getUint32(p + 36, true) : UNKNOWN;
        p += esize;
        const idEnd = s + ID_AT + idLen;
        // The id between its quotes, or (a writer's bug) the lines go the way the segment's do.
        if (!sinks.indexed || idEnd >= s + l || buf[s + ID_AT - 1] !== 0x22 || buf[idEnd] !== 0x22) {
          trusted(buf, s, s + l, at + s);
          if (done) trusted(buf, rs, rs + rl, at + rs);
          continue;
        }
        seen.checked = true;
        const x = scratch;
        x.id = buf.toString(ascii ? 'latin1' : 'utf8', s + ID_AT, idEnd);
        x.at = t; x.buf = buf; x.start = s; x.end = s + l;
        x.resultStart = rs; x.resultEnd = done ? rs + rl : -1; x.resultAt = rat; x.bytes = bytes === UNKNOWN ? -1 : bytes;
        sinks.indexed(x);
      }
      if (want < len) { out.partial = true; splitLines(buf, want, at, checked); }
      p = next;
      at += len;
    }
    flushBad();
    return out;
  } finally { fs.closeSync(fd); }
}

/** Each line of `buf` from `from` on (the last one may lack its newline) to `onLine`, at its file offset (`base` + its place). */
function splitLines(buf: Buffer, from: number, base: number, onLine: (buf: Buffer, start: number, end: number, offset: number) => void): void {
  while (from < buf.length) {
    const nl = buf.indexOf(10, from);
    const end = nl < 0 ? buf.length : nl;
    if (end > from) onLine(buf, from, end, base + from);
    from = end + 1;
  }
}

/**
 * An evict entry: its record for replay as decodeLazyEvict would give it, the ids' places and
 * offsets copied from the index as they are (no loop over the ids here); the index's next entry.
 */
function evictEntry(idx: Buffer, v: DataView, p: number, buf: Buffer, s: number, l: number, at: number, trusted: (buf: Buffer, start: number, end: number, offset: number) => void, seen: ReplayState, lazy?: (l: LazyEvict) => void): number {
  const n = v.getUint32(p + 9, true);
  const next = p + 46 + 16 * n;
  if (!lazy || !LE) { trusted(buf, s, s + l, at + s); return next; }
  const flags = idx[p + 29]!;
  const a = idx.byteOffset + p + 46;
  // The line's own bytes: the ids' places are from its start.
  const line = buf.subarray(s, s + l + 1);
  const r: LazyEvict = {
    t: 'evict', buf: line, count: n,
    idStart: new Int32Array(idx.buffer.slice(a, a + 4 * n)),
    idEnd: new Int32Array(idx.buffer.slice(a + 4 * n, a + 8 * n)),
    offsets: new Float64Array(idx.buffer.slice(a + 8 * n, a + 16 * n)),
    file: v.getFloat64(p + 13, true), at: v.getFloat64(p + 21, true),
    end: flags & 1 ? v.getFloat64(p + 30, true) : undefined,
    floor: flags & 2 ? v.getFloat64(p + 38, true) : undefined,
  };
  seen.checked = true;
  lazy(r);
  return next;
}
