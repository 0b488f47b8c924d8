import type { Logger } from 'pino';
import type { ReplicaEntry } from '../protocol/index.js';

type ReplEntry = ReplicaEntry;

/**
 * An entry's JSON length, or a little more: the strings that can be long (spec, text, error, receipt)
 * measured exactly, the rest bounded. Serialising every entry only to measure it was a third of the
 * hub's replication cost.
 */
function entryBytes(e: ReplEntry): number {
  let n = 200 + e.id.length;
  if (e.spec) n += JSON.stringify(e.spec).length;
  if (e.lease) n += e.lease.worker.length;
  const o = e.result ?? e.failure;
  if (o) n += o.worker.length;
  if (e.result?.text !== undefined) n += JSON.stringify(e.result.text).length;
  if (e.result?.receipt !== undefined) n += JSON.stringify(e.result.receipt).length;
  if (e.failure) n += JSON.stringify(e.failure.error).length;
  return n;
}

/** Split entries into groups of at most `max` bytes (JSON length); an entry over 900 KiB is dropped (frames are bounded at 1 MiB). */
export function chunks(entries: ReplEntry[], max: number, log: Logger): ReplEntry[][] {
  const out: ReplEntry[][] = [];
  let cur: ReplEntry[] = [];
  let size = 0;
  for (const e of entries) {
    const s = entryBytes(e);
    if (s > 900 * 1024) { log.warn({ task: e.id, bytes: s }, 'task too large to replicate'); continue; }
    if (cur.length && size + s > max) { out.push(cur); cur = []; size = 0; }
    cur.push(e); size += s;
  }
  if (cur.length) out.push(cur);
  return out;
}
