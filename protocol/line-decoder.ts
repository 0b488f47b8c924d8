/**
 * The NDJSON side of the codec, apart from msgpack: a command that only reads NDJSON (the CLI's
 * streamed answers) loads this and not msgpackr (15-20 ms of a short command's start here).
 */
import type { ErrorCode } from './errors.js';
import { DEFAULT_MAX_LINE } from './types.js';

/** Receives what a decoder finds: decoded values and framing errors. */
export interface FrameSink {
  /** `text`: the line as it came (NDJSON only), for a reader that passes lines on unchanged. */
  frame(value: unknown, text?: string): void;
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
 *
 * The whole lines of a chunk are decoded from UTF-8 in one call and split as a string: per line that
 * spares two buffer views and a decoder call (a hub, a worker and a CLI each read thousands of lines
 * a batch). A chunk whose lines are not all valid UTF-8 goes line by line, so the bad one is named.
 */
export class LineDecoder implements Decoder {
  private parts: Buffer[] = [];
  private size = 0;
  private discarding = false;
  private detached = false;
  private rest: Buffer = EMPTY;
  /** While a line is handed to the sink: the chunk it came from and where the bytes after it start (detach() needs them). */
  private after?: Buffer;
  private afterAt = 0;
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly sink: FrameSink, private readonly maxLine = DEFAULT_MAX_LINE) {}

  push(chunk: Buffer): void {
    if (this.detached) { this.rest = Buffer.concat([this.rest, chunk]); return; }
    let start = 0;
    // A line begun in an earlier chunk (or being dropped as too long) ends first, on its own.
    if (this.size > 0 || this.discarding) {
      const nl = chunk.indexOf(NL);
      if (nl === -1) { this.append(chunk); return; }
      start = this.byLine(chunk, 0, nl + 1);
      if (this.detached) return;
    }
    const last = chunk.lastIndexOf(NL);
    if (last >= start) {
      start = this.whole(chunk, start, last);
      if (this.detached) return;
    }
    if (start < chunk.length) this.append(chunk.subarray(start));
  }

  /** The lines of chunk[from, last] (last is a newline, and no part is buffered): decoded in one call. */
  private whole(chunk: Buffer, from: number, last: number): number {
    let text: string;
    try { text = this.utf8.decode(chunk.subarray(from, last)); } catch { return this.byLine(chunk, from, last + 1); }
    let b = from;
    let i = 0;
    this.after = chunk;
    try {
      while (b <= last) {
        const nl = chunk.indexOf(NL, b);
        const j = text.indexOf('\n', i);
        const line = j === -1 ? text.slice(i) : text.slice(i, j);
        i = j + 1;
        const len = nl - b;
        const at = b;
        b = nl + 1;
        this.afterAt = b;
        if (len > this.maxLine) {
          this.sink.error('SWARM_ERR_LINE_TOO_LONG', `line longer than ${this.maxLine} bytes`, false, frameHead(chunk.subarray(at, Math.min(nl, at + 2048))));
          continue;
        }
        let t = line.charCodeAt(line.length - 1) === 0x0d ? line.slice(0, -1) : line;
        // The decoder drops a byte-order mark at the start of what it decodes: of every line, as one at a time.
        if (at !== from && t.charCodeAt(0) === 0xfeff) t = t.slice(1);
        this.emitText(t);
        if (this.detached) return b;
      }
    } finally { this.after = undefined; }
    return b;
  }

  /** The lines of chunk[from, to), one at a time (to is just past a newline). */
  private byLine(chunk: Buffer, from: number, to: number): number {
    let start = from;
    this.after = chunk;
    try {
      while (start < to) {
        const nl = chunk.indexOf(NL, start);
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
        this.afterAt = start;
        this.emit(line);
        if (this.detached) return start;
      }
    } finally { this.after = undefined; }
    return start;
  }

  detach(): Buffer {
    this.detached = true;
    const out = Buffer.concat([...this.parts, this.rest, this.after ? this.after.subarray(this.afterAt) : EMPTY]);
    this.parts = []; this.size = 0; this.rest = EMPTY; this.after = undefined;
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
    this.emitText(text);
  }

  private emitText(text: string): void {
    if (text.length === 0) return; // blank lines are keep-alives, not errors
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      this.sink.error('SWARM_ERR_BAD_JSON', `invalid JSON: ${(e as Error).message.slice(0, 120)}`);
      return;
    }
    this.sink.frame(value, text);
  }
}
