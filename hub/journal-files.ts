import fs from 'node:fs';
import path from 'node:path';
import { decodeLazy, decodeLine, type Decoded, type JournalRecord, type LazyLine } from './journal-record.js';
import { decodeLazyEvict, type LazyEvict } from './journal-evict.js';

/** The files of a journal in its state directory. */
export interface JournalPaths {
  dir: string;
  /** The segment appends go to. */
  current: string;
  /** A segment frozen by a compaction that has not finished (replayed after the snapshot). */
  old: string;
  snapshot: string;
  /** A snapshot being written; never read (a crash can leave it half-written). */
  snapshotTmp: string;
  /** The snapshot's index (hub/snapshot-index.ts): where its records are, so replay need not scan and check each line. */
  snapshotIndex: string;
  /** An index being written; never read. */
  snapshotIndexTmp: string;
  /** Damaged records, one JSON line each, kept for a person to look at. */
  quarantine: string;
}

export function journalPaths(dir: string): JournalPaths {
  return {
    dir,
    current: path.join(dir, 'journal.ndjson'),
    old: path.join(dir, 'journal.old.ndjson'),
    snapshot: path.join(dir, 'snapshot.ndjson'),
    snapshotTmp: path.join(dir, 'snapshot.ndjson.tmp'),
    snapshotIndex: path.join(dir, 'snapshot.idx'),
    snapshotIndexTmp: path.join(dir, 'snapshot.idx.tmp'),
    quarantine: path.join(dir, 'journal.quarantine.ndjson'),
  };
}

/** A record that could not be used, and where it was. */
export interface Damage { file: string; offset: number; why: string; raw: string }

const CHUNK = 8 * 1024 * 1024;
const MIN_READ = 64 * 1024;

/**
 * Every line of a file, read in chunks (a journal can pass V8's largest string). Returns the byte
 * length up to the last newline: anything after it is a torn tail a crash left mid-write. Each
 * chunk is a buffer of its own, never reused, so `onLine` may keep the line where it lies (replay
 * keeps finished tasks' lines unparsed: hub/replayed.ts); the byte at `end` is the line's newline.
 */
export function readLines(file: string, onLine: (buf: Buffer, start: number, end: number, offset: number) => void, from = 0): { size: number; goodEnd: number } | undefined {
  let fd: number;
  try { fd = fs.openSync(file, 'r'); } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    let carry: Buffer | undefined;
    // `from`: a line boundary to start at (the archive's lines past an evict record's end).
    let pos = from;
    let lineStart = from;
    // Sized by what the file holds (a small segment does not cost a whole chunk); read on to the end
    // all the same, in case it grew meanwhile.
    const size = fs.fstatSync(fd).size;
    for (;;) {
      const keep = carry?.length ?? 0;
      const want = Math.min(CHUNK, Math.max(size - pos, MIN_READ));
      const buf = Buffer.allocUnsafe(keep + want);
      if (carry) carry.copy(buf, 0);
      const n = fs.readSync(fd, buf, keep, want, pos);
      if (n === 0) break;
      pos += n;
      const data = buf.subarray(0, keep + n);
      let from = 0;
      for (let nl = data.indexOf(10, from); nl >= 0; nl = data.indexOf(10, from)) {
        if (nl > from) onLine(data, from, nl, lineStart);
        lineStart += nl + 1 - from;
        from = nl + 1;
      }
      // The next chunk starts with it.
      carry = from < data.length ? data.subarray(from) : undefined;
    }
    return { size: pos, goodEnd: lineStart };
  } finally { fs.closeSync(fd); }
}

/** What replay has seen so far, across the files it reads in order. */
export interface ReplayState {
  /** A checksummed record was read: from here on a line without a checksum is damage, not an old format. */
  checked: boolean;
}

/**
 * Read one journal file: the intact records in order, and what was damaged (a torn tail included).
 * A line without check fields is accepted only before the journal's first checksummed record (a
 * journal written before checksums, then appended to): after one, it is damage, since no writer
 * since then writes such lines. A checksummed record that says it came from such a line
 * (`unchecked`, written by a compaction) counts as legacy too: the snapshot does not vouch for it.
 * With `lazy`, a task, result or evict line in the writer's own form goes there unparsed (decodeLazy, decodeLazyEvict).
 */
export function readJournalFile(file: string, seen: ReplayState = { checked: false }, sink?: (r: JournalRecord) => void, lazy?: (l: LazyLine | LazyEvict) => void): ReadFile {
  const out: ReadFile = { records: [], damage: [], legacy: 0, size: 0, goodEnd: 0 };
  const r = readLines(file, lineReader(path.basename(file), out, seen, sink, lazy));
  if (!r) return out;
  out.size = r.size;
  out.goodEnd = r.goodEnd;
  if (r.goodEnd < r.size) {
    const fd = fs.openSync(file, 'r');
    const tail = Buffer.alloc(Math.min(r.size - r.goodEnd, 1 << 20));
    fs.readSync(fd, tail, 0, tail.length, r.goodEnd);
    fs.closeSync(fd);
    out.damage.push({ file: path.basename(file), offset: r.goodEnd, why: 'torn last line (a crash mid-write)', raw: tail.toString('utf8') });
  }
  return out;
}

/** What reading one journal file gave: its intact records (without a sink), the damage, how far it was whole. */
export interface ReadFile { records: JournalRecord[]; damage: Damage[]; legacy: number; size: number; goodEnd: number }

/**
 * Replay's handling of one line of file `name` (readJournalFile's, and the snapshot index's for lines
 * it does not describe), into `out`. `trusted`: the line's bytes were checked already (a range
 * checksum of the snapshot index), so its own CRC-32 is not taken again on the lazy paths.
 */
export function lineReader(name: string, out: ReadFile, seen: ReplayState, sink?: (r: JournalRecord) => void, lazy?: (l: LazyLine | LazyEvict) => void, trusted = false): (buf: Buffer, start: number, end: number, offset: number) => void {
  return (buf, start, end, offset) => {
    if (lazy) {
      const l = decodeLazy(buf, start, end, trusted) ?? decodeLazyEvict(buf, start, end, trusted);
      if (l) { seen.checked = true; lazy(l); return; }
    }
    const d: Decoded = decodeLine(buf, start, end);
    if (d.ok && d.legacy && seen.checked) {
      out.damage.push({ file: name, offset, why: 'no checksum after checksummed records', raw: buf.toString('utf8', start, end) });
      return;
    }
    if (!d.ok) { out.damage.push({ file: name, offset, why: d.why, raw: buf.toString('utf8', start, end) }); return; }
    if (d.legacy) { out.legacy++; (d.rec as { unchecked?: true }).unchecked = true; } else {
      seen.checked = true;
      if ((d.rec as { unchecked?: unknown }).unchecked === true) out.legacy++;
    }
    if (sink) sink(d.rec); else out.records.push(d.rec);
  };
}

/** Keep damaged records in the side file (fsynced): they leave the journal at the next compaction. */
export function quarantine(file: string, damage: readonly Damage[], now = Date.now()): void {
  if (!damage.length) return;
  const lines = damage.map((d) => JSON.stringify({ at: now, file: d.file, offset: d.offset, why: d.why, raw: d.raw.slice(0, 1 << 20) }) + '\n').join('');
  const fd = fs.openSync(file, 'a', 0o600);
  try { fs.writeSync(fd, lines); fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
}

/** fsync a directory, so a rename or a new file in it survives a power loss. */
export function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try { fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
}

/** Promise forms of the fd calls the writer needs. */
export const io = {
  write: (fd: number, buf: Buffer): Promise<void> => new Promise((resolve, reject) => {
    const step = (off: number): void => {
      fs.write(fd, buf, off, buf.length - off, null, (err, n) => {
        if (err) return reject(err);
        if (off + n < buf.length) step(off + n); else resolve();
      });
    };
    step(0);
  }),
  fsync: (fd: number): Promise<void> => new Promise((resolve, reject) => fs.fsync(fd, (e) => (e ? reject(e) : resolve()))),
  ftruncate: (fd: number, len: number): Promise<void> => new Promise((resolve, reject) => fs.ftruncate(fd, len, (e) => (e ? reject(e) : resolve()))),
};

/** A writer's buffer: its pieces are this large at most (a line longer than that goes out alone). */
const PIECE_BYTES = 1024 * 1024;

/**
 * One reusable buffer through which a writer's lines go out, a piece at a time. A fresh Buffer per
 * write (and the joined string before it) is garbage that only V8's next full collection frees:
 * between two, the journal's and the archive's traffic piled up outside the JS heap (up to 200 MB in
 * the hub), and a snapshot went out as one piece as large as the hot state. One user at a time (the
 * writer's own chain or busy flag): each piece is valid until the next one is asked for.
 */
export class WriteBuffer {
  private readonly buf = Buffer.allocUnsafeSlow(PIECE_BYTES);

  /**
   * `lines` as UTF-8 in pieces of whole lines; `starts` (if given) gets each line's offset from the
   * first byte. A line given as bytes (a snapshot's line still as read) is copied as it is.
   */
  *pieces(lines: readonly (string | Buffer)[], starts?: number[]): Generator<Buffer> {
    const buf = this.buf;
    let at = 0, base = 0;
    for (const l of lines) {
      if (typeof l !== 'string') {
        if (l.length > buf.length - at && at > 0) { yield buf.subarray(0, at); base += at; at = 0; }
        starts?.push(base + at);
        if (l.length > buf.length) { yield l; base += l.length; continue; }
        at += l.copy(buf, at);
        continue;
      }
      // A UTF-16 unit takes at most 3 UTF-8 bytes: the exact count only when that bound does not fit.
      if (l.length * 3 > buf.length - at) {
        const n = Buffer.byteLength(l, 'utf8');
        if (n > buf.length - at && at > 0) { yield buf.subarray(0, at); base += at; at = 0; }
        if (n > buf.length) { starts?.push(base); yield Buffer.from(l, 'utf8'); base += n; continue; }
      }
      starts?.push(base + at);
      at += buf.write(l, at, 'utf8');
    }
    if (at > 0) yield buf.subarray(0, at);
  }
}
