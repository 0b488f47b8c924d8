import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { SwarmError } from '../protocol/index.js';
import { encodeRecord, type JournalRecord, type LazyLine, type RawLine } from './journal-record.js';
import type { LazyEvict } from './journal-evict.js';
import { WriteBuffer, fsyncDir, io, journalPaths, quarantine, readJournalFile, type Damage, type JournalPaths, type ReadFile } from './journal-files.js';
import { IndexWriter, readIndexedSnapshot, type IndexedTask, type SnapshotTask } from './snapshot-index.js';
export type { JournalRecord, LazyLine, RawLine } from './journal-record.js';

export interface JournalOptions {
  /**
   * `always` (the default): an append resolves only once its bytes are fsynced, one fsync per group
   * of concurrent appends. `interval`: it resolves once written (a killed process loses nothing) and
   * fsync runs every `fsyncMs`, so a power loss can lose that much acknowledged work.
   */
  fsync?: 'always' | 'interval';
  /** The fsync period in `interval` mode; 0 means `always` (kept for older configs). */
  fsyncMs: number;
  /** Compact once the live segment passes this many bytes (and half the last snapshot's size). */
  compactBytes?: number;
  /** Test hook: die with SIGKILL at this compaction step (env SWARM_JOURNAL_CRASH_AT). */
  crashAt?: CompactStep;
}

/** The sync mode the options ask for (`fsyncMs` 0 is `always`, as older configs meant it). */
function syncMode(opts: JournalOptions): 'always' | 'interval' {
  return opts.fsync === 'interval' && opts.fsyncMs > 0 ? 'interval' : 'always';
}

/**
 * The live segment, opened for appending: with O_DSYNC in `always` mode (each write durable when it
 * returns, as write + fdatasync), plainly in `interval` mode (the timer fsyncs).
 */
export function openSegment(file: string, mode: 'always' | 'interval'): number {
  const c = fs.constants;
  return fs.openSync(file, c.O_WRONLY | c.O_APPEND | c.O_CREAT | (mode === 'always' ? c.O_DSYNC : 0), 0o600);
}

/** The steps of a compaction, in order; a crash after any of them loses nothing. */
export const COMPACT_STEPS = ['rotated', 'snapshot-written', 'snapshot-synced', 'snapshot-renamed', 'index-renamed', 'dir-synced', 'old-removed'] as const;
export type CompactStep = (typeof COMPACT_STEPS)[number];

/** What a compaction writes: records, lines still as read, and tasks the snapshot index describes. */
export type SnapshotItem = JournalRecord | RawLine | SnapshotTask;

/** What opening found: the records to replay and the damage set aside. */
export interface OpenedJournal { journal: Journal; records: JournalRecord[]; damage: Damage[]; legacy: number }

/** Counters for status and /metrics. */
export interface JournalStats {
  fsync: 'always' | 'interval';
  segment_bytes: number;
  snapshot_bytes: number;
  compactions: number;
  last_compaction_ms?: number;
  write_errors: number;
  /** The last write failed for want of space; cleared by the next good write. */
  disk_full: boolean;
  /**
   * When a write last failed for want of space (ms since the epoch), kept after the next good one: on a
   * disk that frees and fills again (the archive pruning its files beside it) `disk_full` flaps, and an
   * operator who looks a second later still needs to know that new work was refused.
   */
  disk_full_at?: number;
  /** The open read the snapshot through its index (hub/snapshot-index.ts), not line by line. */
  snapshot_indexed: boolean;
  last_error?: string;
}

/**
 * A restart replays the snapshot and the live segment: the bound on the segment bounds the restart.
 * Half the snapshot (16 MiB at least) keeps a replay within 1.5 snapshots, at twice the snapshot
 * writes of a segment as large as the snapshot (docs/journal.md, "Compaction").
 */
export const DEFAULT_COMPACT_BYTES = 16 * 1024 * 1024;
/** A snapshot's lines are encoded this many characters at a time (one piece of it all was the hot state's size again in memory, twice). */
const SNAPSHOT_PIECE_CHARS = 1024 * 1024;
/** The last line of a whole snapshot: without it, a snapshot was cut short after it was written. */
const SNAPSHOT_END = 'snapshot-end';
const isSnapshotEnd = (r: JournalRecord): boolean => r.t === 'meta' && r.kind === SNAPSHOT_END;
/** Snapshot bytes written between two turns of the event loop. */
const SNAPSHOT_YIELD_BYTES = 16 * 1024 * 1024;

/**
 * The append-only journal, crash-safe and self-checking (docs/journal.md). Appends made while a
 * write is under way go out together in the next write() and share one fsync (group commit). A write
 * that fails leaves nothing behind: the file is cut back to the last whole record before anything
 * else is written, and the append rejects with SWARM_ERR_DISK_FULL or SWARM_ERR_JOURNAL.
 */
export class Journal {
  private pending: string[] = [];
  private waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  /** Every write, repair and rotation runs on this chain, one at a time. */
  private chain: Promise<void> = Promise.resolve();
  private queued = false;
  /** Bytes of whole records in the live segment; the file is cut back to this after a failed write. */
  private size: number;
  private repair = false;
  private dirty = false;
  private closed = false;
  private lastSnapshotCheck = 0;
  private compacting?: Promise<void>;
  private snapshotSource?: () => Iterable<SnapshotItem>;
  private readonly syncTimer?: NodeJS.Timeout;
  private readonly mode: 'always' | 'interval';
  /** The appends' bytes (one flush at a time, on the chain) and the snapshot's (one compaction at a time). */
  private readonly out = new WriteBuffer();
  private readonly snapshotOut = new WriteBuffer();
  readonly stats: JournalStats;

  private constructor(private fd: number, private readonly paths: JournalPaths, private readonly opts: JournalOptions, size: number, snapshotBytes: number) {
    this.size = size;
    this.mode = syncMode(opts);
    this.stats = { fsync: this.mode, segment_bytes: size, snapshot_bytes: snapshotBytes, compactions: 0, write_errors: 0, disk_full: false, snapshot_indexed: false };
    if (this.mode === 'interval') {
      this.syncTimer = setInterval(() => {
        if (!this.dirty) return;
        this.dirty = false;
        fs.fsync(this.fd, (e) => { if (e) this.dirty = true; });
      }, opts.fsyncMs);
      this.syncTimer.unref();
    }
  }

  /**
   * Open the journal in `dir` and read back what it holds: the snapshot, a segment a compaction left
   * frozen, then the live segment. Damaged records (bad checksum, wrong shape, a torn tail) are
   * copied to the quarantine file and left out; every intact record is kept. Never throws for damage.
   * With `sink`, each intact record goes to it as it is read, in order, and `records` comes back empty;
   * with `lazy` too, task, result and evict lines in the writer's own form go there unparsed, in the same order;
   * with `indexed` too, the snapshot's tasks its index describes go there (hub/snapshot-index.ts).
   */
  static open(dir: string, opts: JournalOptions, sink?: (r: JournalRecord) => void, lazy?: (l: LazyLine | LazyEvict) => void, indexed?: (t: IndexedTask) => void): OpenedJournal {
    const p = journalPaths(dir);
    for (const tmp of [p.snapshotTmp, p.snapshotIndexTmp]) try { fs.rmSync(tmp, { force: true }); } catch { /* a leftover of a crash; harmless */ }
    let unindexed = false, indexedRead = false;
    const records: JournalRecord[] = [];
    const damage: Damage[] = [];
    let legacy = 0;
    let snapshotBytes = 0;
    let size = 0;
    let torn = false;
    const seen = { checked: false };
    let endMark = false;
    for (const file of [p.snapshot, p.old, p.current]) {
      // The snapshot's end mark is the journal's own: it never reaches the store.
      const mine = file === p.snapshot ? (x: JournalRecord): boolean => isSnapshotEnd(x) && (endMark = true) : () => false;
      let r: ReadFile;
      const own = sink && ((x: JournalRecord) => { if (!mine(x)) sink(x); });
      try {
        const viaIndex = file === p.snapshot && lazy ? readIndexedSnapshot(file, p.snapshotIndex, seen, { sink: own, lazy, indexed }) : 'absent';
        // A snapshot without its index (an older swarm's, a compaction killed between the renames) is read line by line; the next compaction writes one.
        if (typeof viaIndex === 'string' && file === p.snapshot && fs.existsSync(file)) unindexed = true;
        r = typeof viaIndex === 'string' ? readJournalFile(file, seen, own, lazy) : viaIndex;
        if (typeof viaIndex !== 'string') { indexedRead = true; if (viaIndex.partial) unindexed = true; }
      } catch (e) {
        throw new SwarmError('SWARM_ERR_JOURNAL', `cannot read ${file}: ${(e as Error).message}`);
      }
      for (const x of r.records) if (!mine(x)) records.push(x);
      // A snapshot is renamed into place whole, so one without its mark was cut short since (or written before marks).
      if (file === p.snapshot && !endMark && fs.existsSync(file)) {
        damage.push({ file: path.basename(file), offset: r.size, why: 'the snapshot ends without its end mark: it was cut short after it was written and the records after this offset are missing (or a swarm before end marks wrote it)', raw: '' });
      }
      damage.push(...r.damage);
      legacy += r.legacy;
      if (file === p.snapshot) snapshotBytes = r.size;
      if (file === p.current) {
        size = r.goodEnd;
        // A torn tail is cut off now, so the next append starts on a clean line (or, if that fails,
        // before the first append: the writer cuts the file back to `size` first).
        if (r.goodEnd < r.size) try { fs.truncateSync(file, r.goodEnd); } catch { torn = true; }
      }
    }
    // The hub starts even if the side file cannot be written (a full disk): the damage is still reported.
    try { quarantine(p.quarantine, damage); } catch { /* reported in the status and the log */ }
    let fd: number;
    try { fd = openSegment(p.current, syncMode(opts)); } catch (e) {
      throw new SwarmError('SWARM_ERR_JOURNAL', `cannot open ${p.current}: ${(e as Error).message}`);
    }
    const journal = new Journal(fd, p, opts, size, snapshotBytes);
    journal.repair = torn;
    journal.stats.snapshot_indexed = indexedRead;
    // Damage or an unfinished compaction is cleaned up by compacting as soon as the store has replayed.
    if (damage.some((d) => d.file !== 'journal.ndjson' || d.offset < size) || fs.existsSync(p.old)) journal.wantCompaction = true;
    // A snapshot read without its index (or in part) is read so again at every start until a compaction writes one.
    if (unindexed && lazy) journal.wantCompaction = true;
    return { journal, records, damage, legacy };
  }

  /** Set once opening found something only a compaction removes (damage in place, a frozen segment). */
  wantCompaction = false;

  /** Where a compaction takes the state to snapshot (the store, from memory; a record still unparsed goes as it was read). */
  setSnapshotSource(fn: () => Iterable<SnapshotItem>): void { this.snapshotSource = fn; }

  /** Append records; resolves once they are durable (see JournalOptions.fsync). */
  append(...recs: JournalRecord[]): Promise<void> { return this.appendAll(recs); }

  /** `append` for a list of any length (spread into arguments, a million records overflow the stack). */
  appendAll(recs: readonly JournalRecord[]): Promise<void> {
    if (this.closed) return Promise.reject(new SwarmError('SWARM_ERR_JOURNAL', 'journal is closed'));
    const lines = recs.map(encodeRecord);
    return new Promise((resolve, reject) => {
      for (const l of lines) this.pending.push(l);
      this.waiters.push({ resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.queued) return;
    this.queued = true;
    this.run(async () => { this.queued = false; await this.flush(); });
  }

  private run(job: () => Promise<void>): Promise<void> {
    const p = this.chain.then(job);
    this.chain = p.catch(() => {});
    return p;
  }

  private async flush(): Promise<void> {
    if (!this.pending.length) return;
    const lines = this.pending;
    const waiters = this.waiters;
    this.pending = [];
    this.waiters = [];
    let written = 0;
    let lostFile = false;
    try {
      lostFile = this.reopenIfRemoved();
      if (this.repair) { await io.ftruncate(this.fd, this.size); this.repair = false; }
      try {
        // In `always` mode the segment is open with O_DSYNC: a write returns once its bytes (and the
        // file's new size) are on the disk, so one trip to the thread pool does what write + fsync did
        // in two (a wake-up of a pool thread and of this loop each, per group of small results).
        for (const piece of this.out.pieces(lines)) { await io.write(this.fd, piece); written += piece.length; }
        if (this.mode === 'interval') this.dirty = true;
      } catch (e) {
        // Part of the batch may be in the file: cut it back so no unacknowledged record is replayed
        // and the next record does not land glued to a torn line.
        try { await io.ftruncate(this.fd, this.size); } catch { this.repair = true; }
        throw e;
      }
      this.size += written;
      this.stats.segment_bytes = this.size;
      this.stats.disk_full = false;
      for (const w of waiters) w.resolve();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const full = code === 'ENOSPC' || code === 'EDQUOT';
      this.stats.write_errors++;
      this.stats.disk_full = full;
      if (full) this.stats.disk_full_at = Date.now();
      this.stats.last_error = `${code ?? ''} ${(e as Error).message}`.trim();
      const err = full
        ? new SwarmError('SWARM_ERR_DISK_FULL', `the journal's disk is full; nothing was recorded (retry when space frees): ${(e as Error).message}`, { cause: e })
        : new SwarmError('SWARM_ERR_JOURNAL', `journal write failed; nothing was recorded: ${(e as Error).message}`, { cause: e });
      for (const w of waiters) w.reject(err);
      return;
    }
    if (lostFile && this.snapshotSource) { void this.compact().catch(() => {}); return; }
    if (!this.compacting && this.snapshotSource && this.size > Math.max(this.opts.compactBytes ?? DEFAULT_COMPACT_BYTES, this.stats.snapshot_bytes / 2)) {
      void this.compact().catch(() => {});
    }
  }

  /**
   * The live segment, or the snapshot, removed under the running hub (by hand, or by a cleaner of old
   * files): appends would go on into an inode no name leads to, and every record since the last
   * snapshot would be gone at the next start. The segment is made again under its name, and the
   * caller writes a snapshot from memory at once, which holds everything recorded so far. True when
   * something was missing. The snapshot is looked for at most once a second (a stat; the segment's
   * check is an fstat of the open file).
   */
  private reopenIfRemoved(): boolean {
    const now = Date.now();
    const st = fs.fstatSync(this.fd);
    if (st.nlink > 0 && st.size < this.size) return this.cutShort(st.size);
    let gone = st.nlink === 0;
    if (!gone && now - this.lastSnapshotCheck >= 1000) {
      this.lastSnapshotCheck = now;
      gone = this.stats.snapshot_bytes > 0 && !this.compacting && !fs.existsSync(this.paths.snapshot);
    }
    if (!gone) return false;
    if (fs.fstatSync(this.fd).nlink === 0) {
      fs.mkdirSync(this.paths.dir, { recursive: true, mode: 0o700 });
      const fd = openSegment(this.paths.current, this.mode);
      fs.closeSync(this.fd);
      this.fd = fd;
      this.size = 0;
      this.repair = false;
      this.stats.segment_bytes = 0;
    }
    this.stats.last_error = 'the journal or its snapshot was removed under the running hub: a snapshot is written again from memory';
    return true;
  }

  /**
   * The live segment truncated under the running hub (`truncate`, `: >`, a tool rotating logs): the
   * records cut off are still in memory, so a snapshot from memory (the caller's, at once) holds them
   * again. Appends go on after what is left; a line break goes first so the next record does not land
   * glued to a torn last line (a crash before the snapshot then loses only what the cut took).
   */
  private cutShort(left: number): boolean {
    // The fd only appends (it cannot read the last byte); replay skips an empty line. The size is
    // taken only once that is written: a write that fails (a full disk) leaves the cut to be seen again.
    const mended = left > 0 ? left + fs.writeSync(this.fd, '\n') : 0;
    this.size = mended;
    this.repair = false;
    this.stats.segment_bytes = this.size;
    this.stats.last_error = 'the journal was cut short under the running hub: a snapshot is written again from memory';
    return true;
  }

  /**
   * Snapshot plus a fresh segment (docs/journal.md): freeze the live segment and start a new one,
   * write the snapshot to a temporary file, fsync, rename, fsync the directory, then remove the frozen
   * segment. Replay is idempotent, so a crash after any step loses nothing and duplicates nothing.
   */
  compact(): Promise<void> {
    this.compacting ??= this.doCompact().finally(() => { this.compacting = undefined; });
    return this.compacting;
  }

  private async doCompact(): Promise<void> {
    const source = this.snapshotSource;
    if (!source || this.closed) return;
    const t0 = performance.now();
    const p = this.paths;
    this.wantCompaction = false;
    // A frozen segment still there (a compaction that did not finish) is not overwritten: the
    // snapshot below covers it, since memory holds everything replayed from it.
    if (!fs.existsSync(p.old)) {
      await this.run(async () => {
        if (this.mode === 'interval') await io.fsync(this.fd);
        fs.renameSync(p.current, p.old);
        let fd: number;
        try { fd = openSegment(p.current, this.mode); } catch (e) {
          // Appends still go to the file under the old name: give it its name back.
          fs.renameSync(p.old, p.current);
          throw e;
        }
        fsyncDir(p.dir);
        fs.closeSync(this.fd);
        this.fd = fd;
        this.size = 0;
        this.stats.segment_bytes = 0;
        this.crash('rotated');
      });
    }
    // Appends written to the frozen segment are applied to memory by now (their continuations ran
    // before this macrotask), so the snapshot taken from memory covers the whole frozen segment.
    await new Promise((r) => setImmediate(r));
    let bytes = 0;
    try {
      const fd = fs.openSync(p.snapshotTmp, 'w', 0o600);
      const index = new IndexWriter();
      try {
        let lines: (string | Buffer)[] = [];
        let chars = 0;
        let sinceYield = 0;
        const starts: number[] = [];
        const pieces: { len: number; crc: number }[] = [];
        // Written in place (a page-cache write of a piece takes well under a millisecond); the event
        // loop gets a turn every few megabytes, not every piece: under load one turn is long, and a
        // snapshot written one turn per piece took minutes while the tail it replaces grew.
        const put = (): void => {
          let total = 0;
          for (const b of this.snapshotOut.pieces(lines, starts)) {
            // Each piece is whole lines: a range of the index, checked on replay by one CRC-32.
            pieces.push({ len: b.length, crc: crc32(b) });
            for (let off = 0; off < b.length;) off += fs.writeSync(fd, b, off, b.length - off);
            total += b.length;
          }
          index.wrote(starts, pieces, total);
          bytes += total;
          sinceYield += total;
          lines = [];
          chars = 0;
          starts.length = 0;
          pieces.length = 0;
        };
        // A line still unparsed goes as read, newline included (no decode, no encode).
        const lineOf = (rec: JournalRecord | RawLine): string | Buffer => ('buf' in rec ? rec.buf.subarray(rec.start, rec.end + 1) : encodeRecord(rec));
        for (const rec of source()) {
          let line: string | Buffer;
          if ('t' in rec && rec.t === 'indexed-task') {
            line = lineOf(rec.task);
            index.task(rec.id, rec.at);
            if (rec.result) {
              lines.push(line);
              chars += line.length;
              line = lineOf(rec.result);
              index.result(rec.resultAt, rec.bytes);
            }
          } else if ('t' in rec && rec.t === 'evict') {
            line = encodeRecord(rec);
            index.evict(rec, line);
          } else {
            line = lineOf(rec);
            index.line();
          }
          lines.push(line);
          chars += line.length;
          if (chars < SNAPSHOT_PIECE_CHARS) continue;
          put();
          if (sinceYield >= SNAPSHOT_YIELD_BYTES) { sinceYield = 0; await new Promise((r) => setImmediate(r)); }
        }
        lines.push(encodeRecord({ t: 'meta', kind: SNAPSHOT_END, data: {}, at: Date.now() }));
        index.line();
        put();
        this.crash('snapshot-written');
        await io.fsync(fd);
        this.crash('snapshot-synced');
      } finally { fs.closeSync(fd); }
      // The index, written and synced before either is renamed: a snapshot renamed without its index
      // (a kill between the renames) is read line by line, an index without its snapshot is ignored.
      const ifd = fs.openSync(p.snapshotIndexTmp, 'w', 0o600);
      try {
        const b = index.finish();
        for (let off = 0; off < b.length;) off += fs.writeSync(ifd, b, off, b.length - off);
        await io.fsync(ifd);
      } finally { fs.closeSync(ifd); }
      fs.renameSync(p.snapshotTmp, p.snapshot);
      this.crash('snapshot-renamed');
      fs.renameSync(p.snapshotIndexTmp, p.snapshotIndex);
      this.crash('index-renamed');
      fsyncDir(p.dir);
      this.crash('dir-synced');
    } catch (e) {
      for (const tmp of [p.snapshotTmp, p.snapshotIndexTmp]) try { fs.rmSync(tmp, { force: true }); } catch { /* next open removes it */ }
      this.stats.last_error = `compaction: ${(e as Error).message}`;
      throw e;
    }
    fs.rmSync(p.old, { force: true });
    fsyncDir(p.dir);
    this.crash('old-removed');
    this.stats.snapshot_bytes = bytes;
    this.stats.compactions++;
    this.stats.last_compaction_ms = Math.round(performance.now() - t0);
  }

  private crash(step: CompactStep): void {
    if ((this.opts.crashAt ?? process.env.SWARM_JOURNAL_CRASH_AT) === step) process.kill(process.pid, 'SIGKILL');
  }

  /** Write what is pending, wait for a compaction under way, fsync, close. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.compacting?.catch(() => {});
    await this.run(() => this.flush());
    this.closed = true;
    if (this.syncTimer) clearInterval(this.syncTimer);
    try { fs.fsyncSync(this.fd); } catch { /* best effort */ }
    fs.closeSync(this.fd);
  }
}
