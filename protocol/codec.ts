import { createRequire } from 'node:module';
import type { Packr, Unpackr } from 'msgpackr';
import { frameHead, type Decoder, type FrameSink } from './line-decoder.js';
import { DEFAULT_MAX_LINE } from './types.js';

export { LineDecoder, frameHead, type Decoder, type FrameHead, type FrameSink } from './line-decoder.js';

/**
 * msgpackr is loaded on first use: NDJSON is the default codec, and its ES entry is six modules that
 * a restarted hub read before listening for nothing. Its CommonJS build is one file.
 */
const lazyRequire = createRequire(import.meta.url);
let msgpackr: typeof import('msgpackr') | undefined;
let packrOnce: Packr | undefined;
let unpackrOnce: Unpackr | undefined;
function lib(): typeof import('msgpackr') { return (msgpackr ??= lazyRequire('msgpackr') as typeof import('msgpackr')); }
function packr(): Packr { return (packrOnce ??= new (lib().Packr)({ useRecords: false, mapsAsObjects: true })); }
/**
 * 64-bit ints (`uint64`/`int64`) decode as numbers, not BigInt: the schemas take numbers, and a peer
 * that sends `status: 429` as int64 is not wrong. Past 2^53 they lose precision (no field needs that).
 * Structured-clone references are off: they can build cycles.
 */
function unpackr(): Unpackr { return (unpackrOnce ??= new (lib().Unpackr)({ useRecords: false, mapsAsObjects: true, int64AsType: 'number', structuredClone: false })); }

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
        value = unpackr().unpack(body);
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
  const body = packr().pack(msg);
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  body.copy(out, 4);
  return out;
}
