import { Packr, Unpackr } from 'msgpackr';
import type { ErrorCode } from './errors.js';
import { DEFAULT_MAX_LINE } from './types.js';

/** Receives what a decoder finds: decoded values and framing errors. */
export interface FrameSink {
  frame(value: unknown): void;
  /** `about`: what the head of a dropped frame says it was (its envelope id, its task), so the answer can name it. */
  error(code: ErrorCode, msg: string, fatal?: boolean, about?: FrameHead): void;
}

/** Ids read from the first bytes of a frame too long to decode. */
export interface FrameHead { re?: string; task_id?: string }

/**
 * The envelope `id` and payload `task_id` of an over-long line, from its first bytes (an encoder
 * writes the envelope and `task_id` first). Lets a receiver that must drop a TASK_REQ say which
 * task it was, so that attempt fails at once instead of waiting out its lease.
 */
export function frameHead(head: Buffer): FrameHead {
  const text = head.subarray(0, 2048).toString('utf8');
  const id = /"id"\s*:\s*"([^"\\]{1,128})"/.exec(text)?.[1];
  const task = /"task_id"\s*:\s*"([^"\\]{1,128})"/.exec(text)?.[1];
  return { ...(id ? { re: id } : {}), ...(task ? { task_id: task } : {}) };
}

/** A decoder takes bytes and does no I/O. `detach()` stops it and returns the unconsumed bytes. */
export interface Decoder {
  push(chunk: Buffer): void;
  detach(): Buffer;
}

const NL = 0x0a;
const EMPTY = Buffer.alloc(0);

/**
 * NDJSON decoder: keeps a partial line across chunks, decodes only whole lines (so a multi-byte
 * UTF-8 character split across chunks is never cut), and enforces a maximum line length.
 */
export class LineDecoder implements Decoder {
  private parts: Buffer[] = [];
  private size = 0;
  private discarding = false;
  private detached = false;
  private rest: Buffer = EMPTY;
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly sink: FrameSink, private readonly maxLine = DEFAULT_MAX_LINE) {}

  push(chunk: Buffer): void {
    if (this.detached) { this.rest = Buffer.concat([this.rest, chunk]); return; }
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NL, start);
      if (nl === -1) {
        this.append(chunk.subarray(start));
        return;
      }
      const tail = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.discarding) {
        this.discarding = false;
        this.parts = []; this.size = 0;
        continue;
      }
      if (this.size + tail.length > this.maxLine) {
        const head = frameHead(this.head(tail));
        this.parts = []; this.size = 0;
        this.sink.error('SWARM_ERR_LINE_TOO_LONG', `line longer than ${this.maxLine} bytes`, false, head);
        continue;
      }
      const line = this.size === 0 ? tail : Buffer.concat([...this.parts, tail]);
      this.parts = []; this.size = 0;
      // The sink may detach us while handling this line (a codec switch): it must get the bytes after it.
      this.rest = chunk.subarray(start);
      this.emit(line);
      if (this.detached) return;
      this.rest = EMPTY;
    }
  }

  detach(): Buffer {
    this.detached = true;
    const out = Buffer.concat([...this.parts, this.rest]);
    this.parts = []; this.size = 0; this.rest = EMPTY;
    return out;
  }

  /** The first bytes of the line being dropped (buffered parts, then `more`). */
  private head(more: Buffer): Buffer {
    const out: Buffer[] = [];
    let n = 0;
    for (const p of [...this.parts, more]) { if (n >= 2048) break; out.push(p); n += p.length; }
    return Buffer.concat(out).subarray(0, 2048);
  }

  private append(bytes: Buffer): void {
    if (this.discarding || bytes.length === 0) return;
    if (this.size + bytes.length > this.maxLine) {
      // Report once, then drop everything up to the next newline without buffering it.
      const head = frameHead(this.head(bytes));
      this.parts = []; this.size = 0; this.discarding = true;
      this.sink.error('SWARM_ERR_LINE_TOO_LONG', `line longer than ${this.maxLine} bytes`, false, head);
      return;
    }
    // Copy: the socket may reuse its buffer.
    this.parts.push(Buffer.from(bytes));
    this.size += bytes.length;
  }

  private emit(line: Buffer): void {
    let end = line.length;
    if (end > 0 && line[end - 1] === 0x0d) end--; // tolerate CRLF
    if (end === 0) return; // blank lines are keep-alives, not errors
    let text: string;
    try {
      text = this.utf8.decode(line.subarray(0, end));
    } catch {
      this.sink.error('SWARM_ERR_BAD_JSON', 'line is not valid UTF-8');
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      this.sink.error('SWARM_ERR_BAD_JSON', `invalid JSON: ${(e as Error).message.slice(0, 120)}`);
      return;
    }
    this.sink.frame(value);
  }
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });
/**
 * 64-bit ints (`uint64`/`int64`) decode as numbers, not BigInt: the schemas take numbers, and a peer
 * that sends `status: 429` as int64 is not wrong. Past 2^53 they lose precision (no field needs that).
 * Structured-clone references are off: they can build cycles.
 */
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number', structuredClone: false });

/**
 * Keep only what JSON could carry: msgpackr also decodes extension types (BigInt, Date, Error,
 * Set, RegExp, typed arrays) and `bin` as Buffer, none of which the protocol has and any of which
 * could surprise code past the schemas (passthrough fields are journaled as JSON). The `undefined`
 * extension (fixext 1, type 0: how msgpackr encodes an unset field) means "absent": such keys are
 * deleted (in an array the slot becomes null, as JSON would write it). Works in place on the fresh
 * value msgpackr returned; the result names what was refused, or is undefined when all is well.
 */
export function plainValue(v: unknown, depth = 0): string | undefined {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return undefined;
  if (typeof v === 'number') return Number.isFinite(v) ? undefined : `non-finite number ${v}`;
  if (typeof v !== 'object') return `${typeof v} values are not part of the protocol`;
  if (depth >= 64) return 'nested deeper than 64 levels';
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (v[i] === undefined) { v[i] = null; continue; }
      const why = plainValue(v[i], depth + 1);
      if (why) return why;
    }
    return undefined;
  }
  const proto = Object.getPrototypeOf(v) as unknown;
  if (proto !== Object.prototype && proto !== null) return `${(v as object).constructor?.name ?? 'object'} values are not part of the protocol`;
  const o = v as Record<string, unknown>;
  for (const k in o) {
    const x = o[k];
    if (x === undefined) { delete o[k]; continue; }
    const why = plainValue(x, depth + 1);
    if (why) return why;
  }
  return undefined;
}

/** msgpack decoder: frames are a 4-byte big-endian length and a msgpack body. */
export class MsgpackDecoder implements Decoder {
  private buf: Buffer = Buffer.alloc(0);
  private detached = false;
  private dead = false;

  constructor(private readonly sink: FrameSink, private readonly maxFrame = DEFAULT_MAX_LINE) {}

  push(chunk: Buffer): void {
    if (this.dead) return;
    this.buf = this.buf.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.buf, chunk]);
    if (this.detached) return;
    while (this.buf.length >= 4) {
      const len = this.buf.readUInt32BE(0);
      if (len > this.maxFrame) {
        // A length prefix cannot be resynchronised: the stream is unusable.
        this.dead = true;
        this.buf = Buffer.alloc(0);
        this.sink.error('SWARM_ERR_LINE_TOO_LONG', `frame of ${len} bytes exceeds ${this.maxFrame}`, true);
        return;
      }
      if (this.buf.length < 4 + len) return;
      const body = this.buf.subarray(4, 4 + len);
      this.buf = this.buf.subarray(4 + len);
      let value: unknown;
      try {
        value = unpackr.unpack(body);
      } catch (e) {
        this.sink.error('SWARM_ERR_BAD_FRAME', `invalid msgpack: ${String((e as Error)?.message).slice(0, 120)}`);
        continue;
      }
      const why = plainValue(value);
      if (why) { this.sink.error('SWARM_ERR_BAD_FRAME', `msgpack: ${why}`); continue; }
      this.sink.frame(value);
      if (this.detached) return;
    }
  }

  detach(): Buffer {
    this.detached = true;
    const out = this.buf;
    this.buf = Buffer.alloc(0);
    return out;
  }
}

/** Encode one message as an NDJSON line. */
export function encodeLine(msg: unknown): Buffer {
  return Buffer.from(JSON.stringify(msg) + '\n', 'utf8');
}

/**
 * Encode an NDJSON line whose payload is already JSON text (`payloadJson`, the encoding of a plain
 * value): the hub sends one STATE delta to several holders, and serialising it once for all of them
 * is what this is for. `envelope` is the message without its payload (or with it undefined).
 */
export function encodeLineWithPayload(envelope: Record<string, unknown>, payloadJson: string): Buffer {
  return Buffer.from(`${JSON.stringify(envelope).slice(0, -1)},"payload":${payloadJson}}\n`, 'utf8');
}

/** Encode one message as a length-prefixed msgpack frame. */
export function encodeMsgpack(msg: unknown): Buffer {
  const body = packr.pack(msg);
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  body.copy(out, 4);
  return out;
}
