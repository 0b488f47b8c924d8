import { SwarmError } from '../protocol/errors.js';
import { formatBytes } from '../protocol/bytes.js';
import { MAX_RETAIN_MS, formatDuration, parseBytes, parseDuration } from './retention.js';

/**
 * How much of the results archive stays on disk: the oldest whole files go first once the files
 * hold more than `bytes` together, or once their last line is older than `ageMs` (0: no bound of
 * that kind). The file being written is never removed.
 */
export interface ArchiveBound { bytes: number; ageMs: number }

/**
 * The default: 2 GiB, no age. The archive used to grow without bound (a 1M-task soak wrote 5.9 GB);
 * 2 GiB keeps weeks of a busy swarm's results on a disk of any size a hub is given, and `off` keeps
 * everything as before. `swarm deploy render` (k3s) sizes it to the state volume instead.
 */
export const DEFAULT_ARCHIVE_BOUND: Readonly<ArchiveBound> = Object.freeze({ bytes: 2 * 2 ** 30, ageMs: 0 });
/** The smallest byte bound: a few files of 128 KiB (smaller would rotate every few tasks). */
export const MIN_ARCHIVE_BYTES = 2 ** 20;
/** The largest: 1 PiB (a bound past any disk, not a setting to use). */
export const MAX_ARCHIVE_BYTES = 2 ** 50;
/** An archive file is closed and the next begun past this many bytes (at most; a byte bound makes files smaller). */
export const ROTATE_BYTES = 64 * 2 ** 20;
/** Files a byte bound is cut into at least: pruning removes at most about an eighth of what it keeps at once. */
const FILES_PER_BOUND = 8;
/** The smallest file a byte bound cuts into. */
const MIN_ROTATE = 64 * 1024;

/**
 * Where an archive file is rotated under `b`: 64 MiB, or an eighth of the byte bound if that is
 * less, so the archive holds between 7/8 of its bound and the bound (2 GiB: 64 MiB files; 512 MiB:
 * 64 MiB; 1 MiB: 128 KiB).
 */
export function rotateBytesFor(b: ArchiveBound): number {
  if (!b.bytes) return ROTATE_BYTES;
  return Math.max(MIN_ROTATE, Math.min(ROTATE_BYTES, Math.floor(b.bytes / FILES_PER_BOUND)));
}

/**
 * `--archive-max <bytes>[,<age>]`: `2GiB`, `512MiB,30d`, `,90d` (age only), or `off` (keep every
 * file: the archive grows without bound). Bytes take a unit (B, KB, MB, GB, KiB, MiB, GiB, K, M, G),
 * at least 1 MiB; the age is a duration (s, m, h, d), at most 366d. Anything else is SWARM_ERR_CONFIG.
 */
export function parseArchiveMax(v: string, flag = '--archive-max'): ArchiveBound {
  const bad = (why: string) => new SwarmError('SWARM_ERR_CONFIG', `${flag} ${JSON.stringify(v)}: ${why} (expected <bytes>[,<age>], e.g. 2GiB, 512MiB,30d, ,90d, or off)`);
  const s = v.trim();
  if (/^(off|none|unbounded)$/i.test(s)) return { bytes: 0, ageMs: 0 };
  const parts = s.split(',');
  if (parts.length > 2) throw bad('too many parts');
  const [b = '', a = ''] = parts.map((p) => p.trim());
  if (!b && !a) throw bad('empty');
  const out: ArchiveBound = { bytes: 0, ageMs: 0 };
  if (b) {
    const n = parseBytes(b);
    if (!(n >= 1)) throw bad(`bytes ${JSON.stringify(b)} is not a positive size with a unit (B, KB, MB, GB, KiB, MiB, GiB)`);
    if (n < MIN_ARCHIVE_BYTES) throw bad(`bytes ${JSON.stringify(b)} is less than 1 MiB`);
    if (n > MAX_ARCHIVE_BYTES) throw bad(`bytes ${JSON.stringify(b)} is more than 1 PiB`);
    out.bytes = n;
  }
  if (a) {
    const ms = parseDuration(a);
    if (!(ms > 0)) throw bad(`age ${JSON.stringify(a)} is not a positive duration (s, m, h or d)`);
    if (ms > MAX_RETAIN_MS) throw bad(`age ${JSON.stringify(a)} is longer than 366d`);
    out.ageMs = ms;
  }
  return out;
}

/** `--archive-max` for a command line that parseArchiveMax reads back as `b`. */
export function archiveMaxString(b: ArchiveBound): string {
  if (!b.bytes && !b.ageMs) return 'off';
  return `${b.bytes ? `${b.bytes}B` : ''}${b.ageMs ? `,${b.ageMs}ms` : ''}`;
}

/** For people: `2 GiB`, `512 MiB or 30d`, `30d`, `off`. */
export function describeArchiveBound(b: ArchiveBound): string {
  if (!b.bytes && !b.ageMs) return 'off';
  return [b.bytes ? formatBytes(b.bytes) : '', b.ageMs ? formatDuration(b.ageMs) : ''].filter(Boolean).join(' or ');
}

/**
 * The archive's byte bound `swarm deploy render` gives a k3s hub whose state volume holds
 * `volume` bytes: what the volume has left after the journal (segments, snapshot, the compaction's
 * second copy: at most about 4.5x the hot state's byte bound in the soak, docs/journal.md) and a
 * margin for the file being written, in whole MiB. 1Gi with the default horizon (64 MiB): 640 MiB.
 * Undefined when the journal alone would fill the volume.
 */
export function archiveBytesForVolume(volume: number, retainBytes: number): number | undefined {
  const journal = JOURNAL_PER_HOT_BYTE * retainBytes;
  const left = volume - journal - ROTATE_BYTES;
  const mib = Math.floor(left / 2 ** 20);
  return mib * 2 ** 20 >= MIN_ARCHIVE_BYTES ? mib * 2 ** 20 : undefined;
}

/** The journal's bytes on disk at their peak per byte of the hot state's bound (measured: 282 MB at 96 MiB, with a compaction's copy). */
export const JOURNAL_PER_HOT_BYTE = 5;
