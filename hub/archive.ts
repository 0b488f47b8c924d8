import fs from 'node:fs';
import path from 'node:path';
import { SwarmError, type ErrorCode } from '../protocol/index.js';
import { decodeChecked, encodeLine } from './journal-record.js';
import { encodeInTurns, type TurnBound } from './encode-turns.js';
import { WriteBuffer, fsyncDir, io } from './journal-files.js';
import type { TaskRecord, TaskResult, TaskSpec } from './task.js';
import { ROTATE_BYTES, rotateBytesFor, type ArchiveBound } from './archive-bound.js';

/** One finished task as the archive keeps it: everything `swarm results` shows. */
export interface ArchivedTask {
  t: 'archived';
  id: string;
  state: 'done' | 'failed';
  spec: TaskSpec & { id: string };
  attempts: number;
  submitted_at: number;
  finished_at: number;
  evicted_at: number;
  result?: TaskResult;
  error?: { code: ErrorCode; msg: string };
}

/** Counters for status and /metrics. */
export interface ArchiveStats {
  dir: string;
  /** Files kept (read from the archive's list of them: never counted apart). */
  readonly files: number;
  /** Bytes in every archive file (the same list's sum). */
  readonly bytes: number;
  /** Tasks archived since the hub started. */
  archived: number;
  write_errors: number;
  /** The last write failed for want of space (the tasks stay hot; retried). Cleared by the next good write. */
  disk_full: boolean;
  last_error?: string;
  /**
   * A torn last line cut when the archive was opened (a crash mid-write): where, and how many bytes.
   * Its tasks lost nothing: the journal's evict record follows the archive's fsync, so they stayed hot.
   */
  torn_tail?: { file: string; offset: number; bytes: number };
  /**
   * Damage found at open (the files are never rewritten, so only a hand, a disk or a copy does this): a
   * file other than the newest that ends mid-line (cut), lines past the journal's covered end that
   * are not archive lines, the newest file shorter than the journal says. The lines lost answer
   * SWARM_ERR_RESULT_PRUNED; everything else reads as before.
   */
  damaged?: { file: string; why: string }[];
  /** The bound (`--archive-max`; 0: none of that kind). */
  max_bytes: number;
  max_age_ms: number;
  /** Files and bytes removed by the bound since the hub started, and when the last went. */
  pruned_files: number;
  pruned_bytes: number;
  last_pruned_at?: number;
  /** The oldest file kept (its number): tasks archived in files before it answer SWARM_ERR_RESULT_PRUNED. */
  readonly oldest_file: number;
  /** Removals that failed (the file stays; retried, the archive over its bound meanwhile), and the last error. */
  prune_errors: number;
  last_prune_error?: string;
}

/** After a removal failed, the next try waits this long (a failing unlink is not retried every batch). */
const PRUNE_RETRY_MS = 10_000;
/** Six digits or more: a small bound's files (128 KiB at 1 MiB) can pass results-999999 in days at a busy hub. */
const NAME = /^results-(\d{6,})\.ndjson$/;

export const archiveDir = (stateDir: string): string => path.join(stateDir, 'results');
const fileName = (n: number): string => `results-${String(n).padStart(6, '0')}.ndjson`;

/** The archive's files in order, as [number, path]. */
export function archiveFiles(dir: string): [number, string][] {
  let names: string[];
  try { names = fs.readdirSync(dir); } catch (e) {
    // None yet is an empty archive; one this user may not read is not (`swarm results` said "no archived results").
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM') return [];
    throw new SwarmError('SWARM_ERR_STATE_ACCESS', `cannot read the results archive ${dir}: ${(e as Error).message}`);
  }
  return names.flatMap((n) => { const m = NAME.exec(n); return m ? [[Number(m[1]), path.join(dir, n)] as [number, string]] : []; })
    .sort((a, b) => a[0] - b[0]);
}

/** The shape of an archive line (checked by hand: `swarm results` reads millions). */
export function checkArchived(v: unknown): string | undefined {
  if (typeof v !== 'object' || v === null) return 'not an object';
  const r = v as Record<string, unknown>;
  if (r.t !== 'archived' || typeof r.id !== 'string' || (r.state !== 'done' && r.state !== 'failed')) return 'not an archived task';
  if (typeof r.spec !== 'object' || r.spec === null || typeof r.finished_at !== 'number') return 'archived task without spec or time';
  return undefined;
}

export function toArchived(rec: TaskRecord, now: number): ArchivedTask {
  const a: ArchivedTask = {
    t: 'archived', id: rec.id, state: rec.state === 'done' ? 'done' : 'failed', spec: rec.spec, attempts: rec.attempts,
    submitted_at: rec.submittedAt, finished_at: rec.finishedAt ?? now, evicted_at: now,
  };
  if (rec.result) a.result = rec.result;
  if (rec.error && rec.state !== 'done') a.error = rec.error;
  return a;
}

/** The archive line as the hub's view of a task (a duplicate submit answers with it). */
/**
 * A task that left the hot state whose archived line cannot be read here (a memory-only store, a
 * damaged line, an id past the duplicate window): final, shown without its result.
 */
export function unreadableArchived(id: string, finishedAt?: number): TaskRecord {
  return { id, spec: { id, prompt: '', priority: 0 }, state: 'done', attempts: 0, submittedAt: 0, ...(finishedAt !== undefined ? { finishedAt } : {}), seq: -1 };
}

/**
 * A task that left the hot state whose archived line is missing or is not its own (its file cut,
 * garbage written over it) though the file is there: failed with SWARM_ERR_RESULT_PRUNED, as a pruned
 * one, for the same reason (a `done` without its text would read as the task's answer). `where`:
 * the file and offset the journal named.
 */
export function damagedArchived(id: string, where: { file: number; offset: number }, finishedAt?: number): TaskRecord {
  return {
    ...unreadableArchived(id, finishedAt), state: 'failed',
    error: { code: 'SWARM_ERR_RESULT_PRUNED', msg: `the task finished, but its archived record (${fileName(where.file)} at byte ${where.offset}) is missing or damaged: the file was cut or changed outside the hub; it is not run again while its id is in the duplicate window` },
  };
}

/**
 * A task that left the hot state whose archive file is gone (removed by `--archive-max`, or by
 * hand) while its id is still in the duplicate window: final, `failed` with SWARM_ERR_RESULT_PRUNED,
 * whichever way it ended. Not `done` without a text: a client, or a resumed run's node, would read
 * an empty answer as the task's. A resubmit of the id is a duplicate answered with this; it does not
 * run again.
 */
export function prunedArchived(id: string, finishedAt?: number): TaskRecord {
  return {
    ...unreadableArchived(id, finishedAt), state: 'failed',
    error: { code: 'SWARM_ERR_RESULT_PRUNED', msg: 'the task finished, but its archived record was pruned by the results archive\'s bound (--archive-max); it is not run again while its id is in the duplicate window' },
  };
}

export function fromArchived(a: ArchivedTask): TaskRecord {
  return {
    id: a.id, spec: a.spec, state: a.state, attempts: a.attempts, submittedAt: a.submitted_at, finishedAt: a.finished_at, seq: -1,
    ...(a.result ? { result: a.result } : {}), ...(a.error ? { error: a.error } : {}),
  };
}

/**
 * The results archive: finished tasks leave the hot state into append-only files in
 * `<state>/results/`, rotated by size and never rewritten, so nothing finished is lost while the hot
 * state stays bounded; the oldest whole files are removed past the bound (`--archive-max`, `prune`). A write is fsynced before the journal says the tasks left; a write that fails
 * is cut back and rejects like the journal's (SWARM_ERR_DISK_FULL), and the tasks stay hot.
 */
export class ResultsArchive {
  readonly stats: ArchiveStats;
  private busy = false;
  /** Each batch's bytes (one append at a time). */
  private readonly out = new WriteBuffer();

  /**
   * Every file kept, oldest first, with its bytes and when it was last written: what pruning decides
   * on, without a stat. The only count of them: `stats.files`, `.bytes` and `.oldest_file` read it.
   */
  private readonly kept: KeptFile[];
  private pruneAfter = 0;
  private readonly rotateBytes: number;

  private constructor(readonly dir: string, private file: number, private fd: number, private size: number, kept: KeptFile[], private readonly bound: ArchiveBound, rotateBytes: number | undefined) {
    this.kept = kept;
    this.rotateBytes = rotateBytes ?? rotateBytesFor(bound);
    // Getters on the object itself (own and enumerable): status's JSON and a spread still carry them.
    this.stats = {
      dir,
      get files() { return kept.length; },
      get bytes() { let n = 0; for (const k of kept) n += k.bytes; return n; },
      archived: 0, write_errors: 0, disk_full: false,
      max_bytes: bound.bytes, max_age_ms: bound.ageMs, pruned_files: 0, pruned_bytes: 0,
      get oldest_file() { return kept[0]!.n; },
      prune_errors: 0,
    };
  }

  /**
   * Open (or begin) the archive in `stateDir`. `bound`: what pruning keeps (none given: every file);
   * `rotateBytes`: the files' size (default: from the bound, `rotateBytesFor`).
   */
  static open(stateDir: string, rotateBytes?: number, bound: ArchiveBound = { bytes: 0, ageMs: 0 }): ResultsArchive {
    const dir = archiveDir(stateDir);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const files = archiveFiles(dir);
    const kept: KeptFile[] = [];
    const [n, last] = files.at(-1) ?? [1, path.join(dir, fileName(1))];
    // An older file ends with a whole line unless something cut it: its last byte is read with its
    // size, so it is said (the newest is cut back to whole lines below).
    const cut: [number, number][] = [];
    for (const [m, f] of files) {
      try {
        const st = fs.statSync(f);
        kept.push({ n: m, bytes: st.size, at: st.mtimeMs });
        if (m !== n && !endsWithNewline(f, st.size)) cut.push([m, st.size]);
      } catch { /* removed meanwhile */ }
    }
    const fd = fs.openSync(last, 'a+', 0o600);
    // A crash mid-write leaves a torn last line: cut it, so the next line starts clean, and say so.
    const before = fs.fstatSync(fd).size;
    const size = wholeLines(fd);
    if (kept.at(-1)?.n !== n) kept.push({ n, bytes: 0, at: Date.now() });
    kept.at(-1)!.bytes = size;
    const a = new ResultsArchive(dir, n, fd, size, kept, bound, rotateBytes ?? (bound.bytes ? undefined : ROTATE_BYTES));
    if (size < before) a.stats.torn_tail = { file: last, offset: size, bytes: before - size };
    for (const [m, end] of cut) a.damage(m, `ends mid-line at byte ${end} (cut or damaged outside the hub): the tasks whose lines were past its last whole line answer SWARM_ERR_RESULT_PRUNED`);
    return a;
  }

  /**
   * Bytes the next batch may take (about): what the current file has left before it rotates, or a
   * whole file's if it rotates first. The evictor sizes its batches by it, so a file passes its size by
   * a line at most: a batch of 5,000 large results went into one file whatever its size, and a small
   * bound was passed several times over on disk.
   */
  get room(): number { return this.size >= this.rotateBytes ? this.rotateBytes : this.rotateBytes - this.size; }

  /** Where the next line goes: the current file and its length. */
  get position(): { file: number; end: number } { return { file: this.file, end: this.size }; }

  /** Append finished tasks (one fsync); resolves with where each line went and the file's length after. One append at a time. */
  async append(recs: readonly ArchivedTask[], turn?: TurnBound): Promise<{ file: number; offsets: number[]; end: number }> {
    if (this.busy) throw new SwarmError('SWARM_ERR_INTERNAL', 'archive append already under way');
    this.busy = true;
    try {
      const starts: number[] = [];
      let written = 0;
      try {
        // Inside the try: a new file that cannot be made (a full disk) fails the batch like a write,
        // and so does a leftover that cannot be cut (nothing is written after it).
        const st = this.fstat();
        if (!st || st.nlink === 0) this.rotate();
        else {
          // A failed write whose cut-back failed too left its lines past the good length: cut now.
          // The file is opened for appending, so the batch went in after them, and the archive held
          // those tasks twice (a restart meanwhile takes them as written: `Evictor.settle`).
          if (st.size > this.size) await io.ftruncate(this.fd, this.size);
          if (this.size >= this.rotateBytes) this.rotateOrStay();
        }
        // With `turn`, encoded a turn of the loop at a time (`busy` keeps other appends out meanwhile).
        const lines = turn ? await encodeInTurns(recs, encodeLine, turn) : recs.map(encodeLine);
        // Room first: the archive stays under its bound on disk while this batch is written too.
        let incoming = 0;
        for (const l of lines) incoming += Buffer.byteLength(l) + 1;
        this.prune(Date.now(), incoming);
        for (const piece of this.out.pieces(lines, starts)) { await io.write(this.fd, piece); written += piece.length; }
        await io.fsync(this.fd);
      } catch (e) {
        try { await io.ftruncate(this.fd, this.size); } catch { /* cut before the next batch is written (above) */ }
        const code = (e as NodeJS.ErrnoException).code;
        const full = code === 'ENOSPC' || code === 'EDQUOT';
        this.stats.write_errors++;
        this.stats.disk_full = full;
        this.stats.last_error = `${code ?? ''} ${(e as Error).message}`.trim();
        throw full
          ? new SwarmError('SWARM_ERR_DISK_FULL', `the results archive's disk is full; the finished tasks stay in the hot state (retried when space frees): ${(e as Error).message}`, { cause: e })
          : new SwarmError('SWARM_ERR_JOURNAL', `results archive write failed; the finished tasks stay in the hot state: ${(e as Error).message}`, { cause: e });
      }
      const offsets = starts.map((x) => x + this.size);
      this.size += written;
      this.stats.archived += recs.length;
      this.stats.disk_full = false;
      const cur = this.kept.at(-1)!;
      cur.bytes = this.size;
      cur.at = Date.now();
      this.prune();
      return { file: this.file, offsets, end: this.size };
    } finally { this.busy = false; }
  }

  /** Record damage found in archive file `file` (status, and the hub's log at start). */
  damage(file: number, why: string): void {
    (this.stats.damaged ??= []).push({ file: path.join(this.dir, fileName(file)), why });
  }

  /** The archived task at `file`/`offset`, or undefined if it cannot be read (a cheap pread). */
  read(file: number, offset: number): ArchivedTask | undefined {
    return readArchivedAt(path.join(this.dir, fileName(file)), offset);
  }

  /**
   * True if archive file `file` is gone: pruned by the bound (every file before the oldest kept),
   * or removed by hand (looked for only when asked, after a read found nothing).
   */
  gone(file: number): boolean {
    if (file < this.kept[0]!.n) return true;
    return !fs.existsSync(path.join(this.dir, fileName(file)));
  }

  /**
   * Remove the oldest whole files while the archive is over its bound: more bytes than `max_bytes`
   * (with `incoming`, a batch about to be written),
   * or a file last written longer than `max_age_ms` ago; never the file being written. Synchronous
   * and cheap (an unlink per file, normally none: the sizes and times are kept in memory). A removal
   * that fails (permissions, an immutable file) stops the pass: the file stays, counted and
   * reported, and the next try waits PRUNE_RETRY_MS; the archive goes on being written.
   */
  prune(now = Date.now(), incoming = 0): number {
    const { bytes: maxBytes, ageMs } = this.bound;
    if ((!maxBytes && !ageMs) || now < this.pruneAfter) return 0;
    let n = 0;
    while (this.kept.length > 1) {
      const old = this.kept[0]!;
      const over = (maxBytes > 0 && this.stats.bytes + incoming > maxBytes) || (ageMs > 0 && old.at < now - ageMs);
      if (!over || old.n === this.file) break;
      try { fs.unlinkSync(path.join(this.dir, fileName(old.n))); this.stats.last_prune_error = undefined; } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
          this.stats.prune_errors++;
          this.stats.last_prune_error = `${fileName(old.n)}: ${(e as Error).message}`;
          this.pruneAfter = now + PRUNE_RETRY_MS;
          break;
        }
      }
      this.kept.shift();
      this.stats.pruned_files++;
      this.stats.pruned_bytes += old.bytes;
      this.stats.last_pruned_at = now;
      n++;
    }
    return n;
  }

  /**
   * The file being appended to, one fstat per batch. Removed (nlink 0, or no answer: an operator
   * clearing old results took the live one too, or the whole results folder), lines written there
   * would vanish with the last descriptor, so the next batch goes to a new file instead.
   */
  private fstat(): fs.Stats | undefined {
    try { return fs.fstatSync(this.fd); } catch { return undefined; }
  }

  /** fsync the file being appended to (its lines durable before the journal points at them). */
  async sync(): Promise<void> { await io.fsync(this.fd); }

  /**
   * Rotate, or if the next file cannot be made for anything but a full disk (the folder made
   * read-only), go on in this one, past its size: a line archived late in a long file loses nothing,
   * where a failed write would keep every finished task hot. Counted in `prune_errors`; tried again
   * at the next batch.
   */
  private rotateOrStay(): void {
    try { this.rotate(); } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EDQUOT') throw e;
      this.stats.prune_errors++;
      this.stats.last_prune_error = `cannot begin ${fileName(this.file + 1)} (${fileName(this.file)} goes on past its size): ${(e as Error).message}`;
    }
  }

  private rotate(): void {
    // The folder may be gone too (rm -r results/): made again, owner-only.
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const next = this.file + 1;
    const fd = fs.openSync(path.join(this.dir, fileName(next)), 'a+', 0o600);
    fsyncDir(this.dir);
    fs.closeSync(this.fd);
    this.fd = fd;
    this.file = next;
    this.size = 0;
    this.kept.push({ n: next, bytes: 0, at: Date.now() });
  }

  close(): void { try { fs.closeSync(this.fd); } catch { /* closed */ } }
}

/** An archive file as pruning sees it: its number, bytes, and when it was last written (epoch ms). */
interface KeptFile { n: number; bytes: number; at: number }

/**
 * Read one archive line at `offset`: undefined where the file is gone or holds no whole, valid line
 * there (cut or damaged); throws on any other I/O error (a passing EMFILE or EIO is not damage).
 */
export function readArchivedAt(file: string, offset: number): ArchivedTask | undefined {
  let fd: number;
  try { fd = fs.openSync(file, 'r'); } catch (err) { if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined; throw err; }
  try {
    let len = 64 * 1024;
    for (;;) {
      const buf = Buffer.allocUnsafe(len);
      const n = fs.readSync(fd, buf, 0, len, offset);
      const nl = buf.subarray(0, n).indexOf(10);
      if (nl >= 0) {
        const d = decodeChecked(buf, 0, nl, checkArchived);
        return d.ok && !d.legacy ? d.rec as ArchivedTask : undefined;
      }
      if (n < len) return undefined;
      len *= 4;
    }
  } finally { fs.closeSync(fd); }
}

/** Whether a file of `size` bytes ends with a newline (or is empty): one byte read. */
function endsWithNewline(file: string, size: number): boolean {
  if (size === 0) return true;
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(1);
    return fs.readSync(fd, b, 0, 1, size - 1) === 1 && b[0] === 10;
  } finally { fs.closeSync(fd); }
}

/** Cut a file back to its last newline; returns its size then. */
function wholeLines(fd: number): number {
  const size = fs.fstatSync(fd).size;
  if (size === 0) return 0;
  const buf = Buffer.allocUnsafe(Math.min(size, 1 << 20));
  for (let end = size; end > 0;) {
    const start = Math.max(0, end - buf.length);
    const n = fs.readSync(fd, buf, 0, end - start, start);
    const nl = buf.subarray(0, n).lastIndexOf(10);
    if (nl >= 0) {
      const good = start + nl + 1;
      if (good < size) fs.ftruncateSync(fd, good);
      return good;
    }
    end = start;
  }
  fs.ftruncateSync(fd, 0);
  return 0;
}
