import fs from 'node:fs';
import { archiveDir, archiveFiles, checkArchived, type ArchivedTask } from './archive.js';
import { decodeChecked } from './journal-record.js';
import { readLines } from './journal-files.js';

export interface ArchiveQuery {
  /** Only tasks finished at or after this (epoch ms). */
  since?: number;
  /** Only these ids. */
  ids?: ReadonlySet<string>;
}

/** What a read skipped: damaged lines (a torn tail, a bad checksum) and crash-repeated ones. */
export interface ArchiveReadReport { damaged: number; repeated: number }

/** How many recent (id, finished_at) keys a read remembers to drop a line a crash wrote twice. */
const RECENT = 200_000;

/**
 * Every archived task matching `q`, oldest file first, without a hub (`swarm results` reads the
 * state directory). A crash between an archive write and the journal's evict record archives those
 * tasks again on the next pass: the repeat has the same id and finish time, and is left out.
 */
export function readArchive(stateDir: string, q: ArchiveQuery, onTask: (a: ArchivedTask) => void): ArchiveReadReport {
  const rep: ArchiveReadReport = { damaged: 0, repeated: 0 };
  // Two generations of keys: bounded memory, and a repeat is never far from its first copy.
  let cur = new Set<string>();
  let prev = new Set<string>();
  for (const [, file] of archiveFiles(archiveDir(stateDir))) {
    const r = readLines(file, (buf, start, end) => {
      const d = decodeChecked(buf, start, end, checkArchived);
      if (!d.ok || d.legacy) { rep.damaged++; return; }
      const a = d.rec as ArchivedTask;
      const key = `${a.finished_at}:${a.id}`;
      if (cur.has(key) || prev.has(key)) { rep.repeated++; return; }
      cur.add(key);
      if (cur.size >= RECENT / 2) { prev = cur; cur = new Set(); }
      if (q.since !== undefined && a.finished_at < q.since) return;
      if (q.ids && !q.ids.has(a.id)) return;
      onTask(a);
    });
    if (r && r.goodEnd < r.size) rep.damaged++;
  }
  return rep;
}

/** A place in the archive: file number, byte offset in it. */
export interface ArchivePlace { file: number; end: number }

/**
 * The archived lines at or after `from` (file, byte offset) in the archive folder `dir`, with where
 * each is. Without `from` (a state directory from before evict records carried `end`), the last
 * file's lines: the only one appended to since. What the evictor reads to find the lines no evict
 * record covers (hub/archive-evict.ts `settle`).
 */
export function readArchiveAfter(dir: string, from: ArchivePlace | undefined, onTask: (a: ArchivedTask, file: number, offset: number) => void, onDamaged?: (file: number, offset: number) => void): void {
  const files = archiveFiles(dir);
  const start = from ?? (files.length ? { file: files.at(-1)![0], end: 0 } : undefined);
  if (!start) return;
  for (const [n, file] of files) {
    if (n < start.file) continue;
    const min = n === start.file ? start.end : 0;
    // From `min` on (the place an evict record's `end` names is a line's start): read from the file's
    // start, the lines before it were a whole archive file read at every start only to be skipped.
    readLines(file, (buf, s, e, offset) => {
      const d = decodeChecked(buf, s, e, checkArchived);
      if (d.ok && !d.legacy) onTask(d.rec as ArchivedTask, n, offset);
      else onDamaged?.(n, offset);
    }, min);
  }
}

/** Bytes one read of `readArchivedMany` takes at most (a line longer than it is read on its own). */
const WINDOW = 1 << 20;

/**
 * The archived tasks at these places, read file by file in offset order, a window of about 1 MiB at
 * a time (async reads, the event loop free between them), instead of a synchronous pread of 64 KiB
 * each: a restarted hub reading back 50,000 evicted tasks held its event loop for 40 s (load 24).
 * A place whose line is unreadable or not that task's is left out.
 */
export async function readArchivedMany(dir: string, places: readonly { id: string; file: number; offset: number }[], onTask: (id: string, a: ArchivedTask) => void): Promise<void> {
  const paths = new Map(archiveFiles(dir));
  const byFile = new Map<number, { id: string; offset: number }[]>();
  for (const p of places) (byFile.get(p.file) ?? byFile.set(p.file, []).get(p.file)!).push(p);
  for (const [file, list] of byFile) {
    const name = paths.get(file);
    if (!name) continue;
    list.sort((a, b) => a.offset - b.offset);
    let fh: fs.promises.FileHandle;
    try { fh = await fs.promises.open(name, 'r'); } catch { continue; }
    try {
      let buf = Buffer.alloc(0), at = 0, t0 = performance.now();
      for (const p of list) {
        // A window holds thousands of lines: their checks yield to the loop every few ms too.
        if (performance.now() - t0 >= 5) { await new Promise<void>((r) => setImmediate(r)); t0 = performance.now(); }
        let start = p.offset - at;
        let nl = start >= 0 && start < buf.length ? buf.indexOf(10, start) : -1;
        if (nl < 0) {
          // Not in the window read last: the next window starts at this line (longer if the line is).
          for (let len = WINDOW; ; len *= 4) {
            const b = Buffer.allocUnsafe(len);
            const { bytesRead } = await fh.read(b, 0, len, p.offset);
            buf = b.subarray(0, bytesRead);
            at = p.offset;
            start = 0;
            nl = buf.indexOf(10);
            if (nl >= 0 || bytesRead < len) break;
          }
          if (nl < 0) continue;
        }
        const d = decodeChecked(buf, start, nl, checkArchived);
        if (d.ok && !d.legacy && (d.rec as ArchivedTask).id === p.id) onTask(p.id, d.rec as ArchivedTask);
      }
    } finally { await fh.close(); }
  }
}
