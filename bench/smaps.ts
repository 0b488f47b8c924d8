/**
 * Memory accounting from /proc/PID/smaps: how much of one mapped file a process holds (Rss), its
 * proportional share of those pages (Pss: a page mapped by 4 processes counts 1/4 in each), and how
 * much private anonymous memory the process has (where llama.cpp puts repacked weights).
 */
import fs from 'node:fs';

/** Sizes in bytes for one file's mappings in one process (summed over its VMAs). */
export interface FileMapping {
  /** VMAs of this file. */
  vmas: number;
  size: number;
  rss: number;
  pss: number;
  sharedClean: number;
  privateClean: number;
  privateDirty: number;
}

/** Whole-process sizes in bytes, from /proc/PID/smaps_rollup. */
export interface ProcessMemory {
  rss: number;
  pss: number;
  pssAnon: number;
  pssFile: number;
  anonymous: number;
  privateClean: number;
  privateDirty: number;
}

const KB = 1024;

function field(block: string, name: string): number {
  const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(block);
  return m ? Number(m[1]) * KB : 0;
}

/** The mappings of `file` (compared by real path) in process `pid`. */
export function fileMapping(pid: number, file: string): FileMapping {
  const want = fs.realpathSync(file);
  const text = fs.readFileSync(`/proc/${pid}/smaps`, 'utf8');
  const out: FileMapping = { vmas: 0, size: 0, rss: 0, pss: 0, sharedClean: 0, privateClean: 0, privateDirty: 0 };
  // Each VMA starts with a header line "start-end perms offset dev inode   path".
  const blocks = text.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/);
  for (const b of blocks) {
    const header = b.slice(0, b.indexOf('\n'));
    const parts = header.trim().split(/\s+/);
    const p = parts.slice(5).join(' ');
    if (p !== want) continue;
    out.vmas++;
    out.size += field(b, 'Size');
    out.rss += field(b, 'Rss');
    out.pss += field(b, 'Pss');
    out.sharedClean += field(b, 'Shared_Clean');
    out.privateClean += field(b, 'Private_Clean');
    out.privateDirty += field(b, 'Private_Dirty');
  }
  return out;
}

/** Whole-process memory from smaps_rollup. */
export function processMemory(pid: number): ProcessMemory {
  const r = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return {
    rss: field(r, 'Rss'), pss: field(r, 'Pss'), pssAnon: field(r, 'Pss_Anon'), pssFile: field(r, 'Pss_File'),
    anonymous: field(r, 'Anonymous'), privateClean: field(r, 'Private_Clean'), privateDirty: field(r, 'Private_Dirty'),
  };
}

/** Bytes as MB with one decimal, for tables. */
export const mb = (b: number): number => Math.round(b / 1024 / 1024 * 10) / 10;
