import type { Logger } from 'pino';
import type { ReplicaEntry } from '../protocol/index.js';
import { chunkOf, idParts, MAX_ENTRY, type Chunk } from './replicate-chunks.js';
import { isFinal, type TaskRecord } from './task.js';

/** A task in a flush: its record, whether its spec goes, and the version of its last change when the flush was asked for. */
export interface FlushItem { rec: TaskRecord; spec: boolean; ver: number }

/** A chunk of a flush, and the items it holds (their indexes, in order). */
export interface FlushChunk { chunk: Chunk; idx: number[] }

/**
 * A flush built: its items' entries and their JSON (undefined: too large to replicate); the holders'
 * chunks (every item, in order); and with keepers, their chunks of the open tasks and the ids of the
 * finished ones (hub/replicate-keepers.ts).
 */
export interface BuiltFlush { entries: (ReplicaEntry | undefined)[]; texts: (string | undefined)[]; chunks: FlushChunk[]; open?: FlushChunk[]; closed?: string[] }

/** Items built between two looks at the time (`inSlices`). */
const STEP = 16;

/**
 * Build a flush's entries (signed) and encode them, and cut them into chunks of at most `max` JSON
 * characters, in the items' order (and the keepers' chunks of the open ones, if `keepers`); yielding
 * every few items, so that a large flush (one submit of 10,000 tasks: 30 MB) is built over several
 * turns of the hub's loop instead of holding it for all of them (0.3 s of CPU, 0.5-1.2 s at load:
 * bench/submit-replicate.ts).
 */
export function* buildFlush(items: readonly FlushItem[], entry: (rec: TaskRecord, withSpec: boolean) => ReplicaEntry, max: number, log: Logger, keepers = false): Generator<void, BuiltFlush> {
  const out: BuiltFlush = { entries: [], texts: [], chunks: [] };
  for (let i = 0; i < items.length; i++) {
    if ((i + 1) % STEP === 0) yield;
    const it = items[i]!;
    const e = entry(it.rec, it.spec);
    const text = JSON.stringify(e);
    if (text.length > MAX_ENTRY) { log.warn({ task: e.id, bytes: text.length }, 'task too large to replicate'); out.entries.push(undefined); out.texts.push(undefined); continue; }
    out.entries.push(e); out.texts.push(text);
  }
  const all = items.map((_, i) => i);
  out.chunks = yield* cut(out, all, max);
  if (!keepers) return out;
  // The keepers' share: the open tasks as they are, the finished ones as ids only.
  const open: number[] = [];
  out.closed = [];
  for (const i of all) if (isFinal(items[i]!.rec)) out.closed.push(items[i]!.rec.id); else open.push(i);
  out.open = yield* cut(out, open, max);
  return out;
}

/** The items `idx` that have an entry, in chunks of at most `max` JSON characters, a few a step. */
function* cut(b: BuiltFlush, idx: readonly number[], max: number): Generator<void, FlushChunk[]> {
  const out: FlushChunk[] = [];
  let cur: number[] = [], size = 0;
  for (let k = 0; k < idx.length; k++) {
    if ((k + 1) % (STEP * 16) === 0) yield;
    const i = idx[k]!, text = b.texts[i];
    if (text === undefined) continue;
    if (cur.length && size + text.length > max) { out.push(group(b, cur)); yield; cur = []; size = 0; }
    cur.push(i);
    size += text.length + 1;
  }
  if (cur.length) out.push(group(b, cur));
  return out;
}

function group(b: BuiltFlush, idx: number[]): FlushChunk {
  const es: ReplicaEntry[] = [], ts: string[] = [];
  for (const i of idx) if (b.texts[i] !== undefined) { es.push(b.entries[i]!); ts.push(b.texts[i]!); }
  return { chunk: es.length ? chunkOf(es, ts) : { entries: [], json: '', bytes: 0 }, idx };
}

/** The keepers' chunks of a built flush: the open tasks', then the finished ones' ids in frames a keeper reads. */
export function keeperChunks(b: BuiltFlush): Chunk[] {
  const cs = (b.open ?? []).map((c) => c.chunk).filter((c) => c.entries.length);
  for (const part of idParts(b.closed ?? [])) cs.push({ entries: [], json: '', closed: part });
  return cs;
}
