import { crc32 } from 'node:zlib';
import type { Receipt, ErrorCode } from '../protocol/index.js';
import type { TaskSpec } from './task.js';
import { crc32Range } from './crc32-range.js';

/**
 * One record of the journal (and of its snapshot). `unchecked`: it was read from a line without a
 * checksum (a journal older than checksums); a snapshot keeps saying so rather than vouch for it.
 */
export type JournalRecord =
  | { t: 'task'; spec: TaskSpec & { id: string }; at: number; unchecked?: true }
  | { t: 'result'; id: string; text: string; worker: string; attempt: number; receipt?: Receipt; at: number; unchecked?: true }
  | { t: 'fail'; id: string; error: { code: ErrorCode; msg: string }; attempts: number; at: number; unchecked?: true }
  | { t: 'meta'; kind: string; data: unknown; at: number; unchecked?: true }
  /**
   * Finished tasks that left the hot state for the results archive (hub/archive.ts): their lines are
   * in archive file `file` at `offsets` (same order as `ids`). Replay drops them and remembers the
   * ids for the duplicate window (hub/dup-window.ts). `end`: the archive file's length after the
   * write, so a restart knows which archived lines no evict record covers (hub/archive-evict.ts).
   */
  | { t: 'evict'; ids: string[]; file: number; offsets: number[]; at: number; end?: number; /** TaskStore.acceptedFloor when the snapshot was written. */ floor?: number };

/** Where the check fields start: JSON escapes every `"` inside strings, so this suffix cannot come from data. */
const TAIL = ',"_n":';

/**
 * One line: the record's JSON with its byte length and CRC-32 appended as two last fields,
 * `{…,"_n":123,"_c":"1a2b3c4d"}\n`. The line stays plain JSON (jq and older readers still parse it);
 * the check covers the record as serialized without those fields.
 */
export function encodeRecord(r: JournalRecord): string { return encodeLine(r); }

/** encodeRecord for any JSON object (the results archive uses the same checked lines). */
export function encodeLine(r: object): string {
  const body = JSON.stringify(r);
  // crc32 and byteLength read the string as UTF-8 themselves: no buffer per record (the flush encodes the batch once).
  return `${body.slice(0, -1)}${TAIL}${Buffer.byteLength(body)},"_c":"${crc32(body).toString(16).padStart(8, '0')}"}\n`;
}

export type Decoded = { ok: true; rec: JournalRecord; legacy: boolean } | { ok: false; why: string };

const TAIL_BYTES = Buffer.from(TAIL);
/** The record's closing brace, which the check covers in place of its check fields. */
const CLOSE_BYTE = 0x7d;

/**
 * decodeRecord on the line's bytes as read (without its newline): the checksum is taken on those
 * bytes, so replay does not encode each line back to UTF-8 to check it.
 */
export function decodeLine(buf: Buffer, start: number, end: number): Decoded {
  return decodeChecked(buf, start, end, checkShape) as Decoded;
}

/**
 * One checked line (see encodeLine) with its own shape check. A line without check fields is
 * `legacy` (decodeRecord); the archive, which never had such lines, refuses them itself.
 */
export function decodeChecked(buf: Buffer, start: number, end: number, shape: (v: unknown) => string | undefined): { ok: true; rec: unknown; legacy: boolean } | { ok: false; why: string } {
  const at = buf.lastIndexOf(TAIL_BYTES, end - 1);
  if (at <= start || buf[end - 1] !== 0x7d || buf[end - 2] !== 0x22) return decodeRecord(buf.toString('utf8', start, end), shape);
  const m = /^,"_n":(\d+),"_c":"([0-9a-f]{8})"\}$/.exec(buf.toString('latin1', at, end));
  if (!m) return { ok: false, why: 'malformed check fields' };
  const len = at - start + 1;
  if (len !== Number(m[1])) return { ok: false, why: `length ${len}, expected ${m[1]}` };
  if (crc32Range(buf, start, at, CLOSE_BYTE).toString(16).padStart(8, '0') !== m[2]) return { ok: false, why: 'checksum mismatch' };
  let v: unknown;
  try { v = JSON.parse(buf.toString('utf8', start, at) + '}'); } catch { return { ok: false, why: 'not JSON' }; }
  const why = shape(v);
  return why ? { ok: false, why } : { ok: true, rec: v, legacy: false };
}

/**
 * A task or result line read back without being parsed: what replay needs of it (its id and time),
 * and the line itself (check fields included, no newline), parsed when the record is first used
 * (hub/replayed.ts). Most of a restart's CPU was JSON.parse and the objects it makes, for finished
 * tasks that dispatch never reads and a later record in the journal often evicts.
 */
export interface LazyLine extends RawLine { t: 'task' | 'result'; id: string; at: number }

/**
 * A line where it lies in a buffer read from the journal (`end` excluded: the newline is there), for
 * a record still unparsed; a snapshot writes it again as it was read.
 */
export interface RawLine { buf: Buffer; start: number; end: number }

const scratch: LazyLine = { t: 'task', id: '', at: 0, buf: Buffer.alloc(0), start: 0, end: 0 };

/** How the writer starts these two records: the id is the task spec's first key (TaskStore puts it there). */
export const TASK_HEAD = Buffer.from('{"t":"task","spec":{"id":"');
export const RESULT_HEAD = Buffer.from('{"t":"result","id":"');
const AT_KEY = Buffer.from(',"at":');
const C_KEY = Buffer.from(',"_c":"');

/**
 * The lazy form of a checked task or result line (valid until the next call), or undefined when the line is not exactly as this
 * writer makes them (another key order, an escaped id, `unchecked`, a time not a plain integer,
 * damage of any kind): decodeLine then parses it, and reports what is wrong. The length and CRC-32
 * are checked here as there; what is not checked until the line is parsed is the shape of the
 * fields replay does not read (a line whose checksum holds was written by this writer, which writes
 * checked records only).
 */
export function decodeLazy(buf: Buffer, start: number, end: number, trusted = false): LazyLine | undefined {
  const t = startsWith(buf, start, TASK_HEAD) ? 'task' : startsWith(buf, start, RESULT_HEAD) ? 'result' : undefined;
  if (!t) return undefined;
  const idStart = start + (t === 'task' ? TASK_HEAD.length : RESULT_HEAD.length);
  let q = idStart;
  for (; q < end; q++) { const c = buf[q]!; if (c === 0x22) break; if (c === 0x5c) return undefined; }
  if (q === idStart || q >= end) return undefined;
  const tail = checkedTail(buf, start, end, q, trusted);
  if (tail < 0) return undefined;
  // The record's time: its last field, `,"at":DIGITS` right before the check fields.
  let at = 0, mul = 1, d = tail - 1;
  for (; d > q && buf[d]! >= 0x30 && buf[d]! <= 0x39; d--) { at += (buf[d]! - 0x30) * mul; mul *= 10; }
  if (mul === 1 || mul > 1e15 || !startsWith(buf, d - AT_KEY.length + 1, AT_KEY)) return undefined;
  // One object for every line (read it before the next): 400,000 of them were a tenth of replay's collections.
  const l = scratch;
  l.t = t; l.id = buf.toString('utf8', idStart, q); l.at = at; l.buf = buf; l.start = start; l.end = end;
  return l;
}

/**
 * Where the check fields `,"_n":LEN,"_c":"8 hex"}` of a line start, if they are in the writer's form
 * and its length and CRC-32 hold; else -1. Read by hand: a regex on a string per line cost more
 * than the CRC. `after`: the fields start past this index. `trusted`: the bytes were checked as part
 * of a larger range (hub/snapshot-index.ts), so the CRC-32 is not taken again (its form and the length still are).
 */
export function checkedTail(buf: Buffer, start: number, end: number, after = start, trusted = false): number {
  if (end - start < 32 || buf[end - 1] !== 0x7d || buf[end - 2] !== 0x22) return -1;
  const hexAt = end - 10;
  if (!startsWith(buf, hexAt - C_KEY.length, C_KEY)) return -1;
  const crc = hexValue(buf, hexAt);
  if (crc < 0) return -1;
  let n = 0, mul = 1, d = hexAt - C_KEY.length - 1;
  for (; d > after && buf[d]! >= 0x30 && buf[d]! <= 0x39; d--) { n += (buf[d]! - 0x30) * mul; mul *= 10; }
  if (mul === 1 || !startsWith(buf, d - TAIL_BYTES.length + 1, TAIL_BYTES)) return -1;
  const tail = d - TAIL_BYTES.length + 1;
  if (tail - start + 1 !== n) return -1;
  if (!trusted && crc32Range(buf, start, tail, CLOSE_BYTE) !== crc) return -1;
  return tail;
}

export function startsWith(buf: Buffer, at: number, head: Buffer): boolean {
  if (at < 0 || at + head.length > buf.length) return false;
  for (let i = 0; i < head.length; i++) if (buf[at + i] !== head[i]) return false;
  return true;
}

/** Eight lowercase hex digits as a number, or -1. */
function hexValue(buf: Buffer, at: number): number {
  let v = 0;
  for (let i = at; i < at + 8; i++) {
    const c = buf[i]!;
    const x = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
    if (x < 0) return -1;
    v = v * 16 + x;
  }
  return v;
}

/** Check and parse one line (without its newline). Lines written before checksums (no `_c`) are accepted when their shape is right. */
export function decodeRecord(line: string, shape: (v: unknown) => string | undefined = checkShape): Decoded {
  let body = line;
  let legacy = true;
  const at = line.lastIndexOf(TAIL);
  if (at > 0 && line.endsWith('"}')) {
    const m = /^,"_n":(\d+),"_c":"([0-9a-f]{8})"\}$/.exec(line.slice(at));
    if (!m) return { ok: false, why: 'malformed check fields' };
    body = line.slice(0, at) + '}';
    const buf = Buffer.from(body, 'utf8');
    if (buf.length !== Number(m[1])) return { ok: false, why: `length ${buf.length}, expected ${m[1]}` };
    if (crc32(buf).toString(16).padStart(8, '0') !== m[2]) return { ok: false, why: 'checksum mismatch' };
    legacy = false;
  }
  let v: unknown;
  try { v = JSON.parse(body); } catch { return { ok: false, why: 'not JSON' }; }
  const why = shape(v);
  return why ? { ok: false, why } : { ok: true, rec: v as JournalRecord, legacy };
}

const str = (x: unknown): x is string => typeof x === 'string';
const num = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
const opt = (x: unknown, f: (y: unknown) => boolean): boolean => x === undefined || f(x);
const obj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * The shape replay relies on, checked by hand (zod would cost seconds at a million records).
 * Returns why a record is unusable, or undefined.
 */
export function checkShape(v: unknown): string | undefined {
  if (!obj(v)) return 'not an object';
  switch (v.t) {
    case 'task': {
      const s = v.spec;
      if (!obj(s)) return 'task without spec';
      if (!str(s.id) || !s.id) return 'task spec without id';
      if (!str(s.prompt)) return 'task spec without prompt';
      if (!opt(s.priority, num) || !opt(s.role, str) || !opt(s.max_attempts, num) || !opt(s.timeout_ms, num)) return 'task spec field of the wrong type';
      if (!opt(s.caps, (c) => Array.isArray(c) && c.every(str)) || !opt(s.stop, (c) => Array.isArray(c) && c.every(str))) return 'task spec list of the wrong type';
      if (!num(v.at)) return 'task without time';
      return undefined;
    }
    case 'result':
      if (!str(v.id) || !str(v.text) || !str(v.worker) || !num(v.attempt)) return 'result with missing or mistyped fields';
      if (!opt(v.receipt, obj)) return 'result receipt not an object';
      return undefined;
    case 'fail': {
      const e = v.error;
      if (!str(v.id) || !obj(e) || !str(e.code) || !str(e.msg) || !num(v.attempts)) return 'fail with missing or mistyped fields';
      return undefined;
    }
    case 'meta':
      return str(v.kind) ? undefined : 'meta without kind';
    case 'evict':
      if (!Array.isArray(v.ids) || !v.ids.every(str) || !num(v.file) || !Array.isArray(v.offsets) || v.offsets.length !== v.ids.length || !v.offsets.every(num)) return 'evict with missing or mistyped fields';
      return undefined;
    default:
      return `unknown record type ${JSON.stringify(v.t)?.slice(0, 40)}`;
  }
}
