import type { Logger } from 'pino';
import type { ReplicaEntry } from '../protocol/index.js';

type ReplEntry = ReplicaEntry;

/**
 * One STATE frame's entries, and the same entries as JSON text (the array's inside, without brackets);
 * `closed`: ids of finished tasks, for a keeper of the open tasks only (hub/replicate-keepers.ts).
 */
export interface Chunk {
  entries: ReplEntry[]; json: string; closed?: string[];
  /**
   * The version a holder that got this chunk has every change up to (hub/replicate-resume.ts); none:
   * the frame carries no mark (it vouches for nothing). A flush larger than a chunk goes in several,
   * its entries in the order of their last change: a chunk before the last brings the holder to its
   * last entry's version, the last to the flush's. Marked with the flush's version, a first chunk sent
   * while the rest waited vouched for them, and a holder whose deltas were then dropped resumed from
   * past them and lacked those changes until a repair window came by.
   */
  ver?: number;
}

/** Longest entry replicated, JSON characters: frames are bounded at 1 MiB. */
const MAX_ENTRY = 900 * 1024;

/**
 * Split entries into groups of at most `max` JSON characters; an entry over 900 KiB is dropped.
 * Each entry is serialised once, here: the text both sizes the groups and is the frame's payload,
 * sent as it is to every holder (three holders used to cost three encodings of every delta, plus
 * one more of each spec to measure it).
 */
export function chunks(entries: readonly ReplEntry[], max: number, log: Logger, texts?: readonly string[]): Chunk[] {
  const out: Chunk[] = [];
  let cur: ReplEntry[] = [];
  let parts: string[] = [];
  let size = 0;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    // `texts`: the entries already serialised (shared by the holders' and the keepers' frames).
    const text = texts?.[i] ?? JSON.stringify(e);
    if (text.length > MAX_ENTRY) { log.warn({ task: e.id, bytes: text.length }, 'task too large to replicate'); continue; }
    if (cur.length && size + text.length > max) { out.push({ entries: cur, json: parts.join(',') }); cur = []; parts = []; size = 0; }
    cur.push(e); parts.push(text); size += text.length + 1;
  }
  if (cur.length) out.push({ entries: cur, json: parts.join(',') });
  return out;
}

/** Ids one STATE frame names (`evicted`, `closed`), at most. */
const IDS_PER_FRAME = 10_000;
/**
 * And their JSON characters, at most: ids run up to 128 characters (the schema's bound), so 10,000
 * of them could make 1.3 MB, past the 1 MiB a holder reads in one frame (its link would be cut).
 */
const ID_CHARS_PER_FRAME = 256 * 1024;

/** `ids` in order, in parts that each fit one frame: at most 10,000 ids and 256 KiB of their JSON. */
export function idParts(ids: readonly string[]): string[][] {
  const out: string[][] = [];
  let cur: string[] = [];
  let chars = 0;
  for (const id of ids) {
    const c = id.length + 3;
    if (cur.length && (cur.length >= IDS_PER_FRAME || chars + c > ID_CHARS_PER_FRAME)) { out.push(cur); cur = []; chars = 0; }
    cur.push(id); chars += c;
  }
  if (cur.length) out.push(cur);
  return out;
}
