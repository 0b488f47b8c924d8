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
 * The archived lines at or after `from` (file, byte offset), with where each is. Without `from`
 * (a state directory from before evict records carried `end`), the last file's lines: the only one
 * appended to since. What a restart reads to find the lines no evict record covers.
 */
export function readArchiveAfter(stateDir: string, from: ArchivePlace | undefined, onTask: (a: ArchivedTask, file: number, offset: number) => void): void {
  const files = archiveFiles(archiveDir(stateDir));
  const start = from ?? (files.length ? { file: files.at(-1)![0], end: 0 } : undefined);
  if (!start) return;
  for (const [n, file] of files) {
    if (n < start.file) continue;
    const min = n === start.file ? start.end : 0;
    readLines(file, (buf, s, e, offset) => {
      if (offset < min) return;
      const d = decodeChecked(buf, s, e, checkArchived);
      if (d.ok && !d.legacy) onTask(d.rec as ArchivedTask, n, offset);
    });
  }
}
