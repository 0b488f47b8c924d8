import type { Socket } from 'node:net';
import { LineDecoder, MsgpackDecoder, encodeLine, encodeLineWithPayload, encodeMsgpack, type Decoder, type FrameSink } from './codec.js';
import { ErrorCode, type ErrorCode as Code } from './errors.js';
import type { AnyMessage, Payload } from './schemas.js';
import { validate } from './validate.js';
import { Codec, DEFAULT_MAX_LINE, DEFAULT_MAX_OUTBOUND, PROTOCOL_VERSION, Type } from './types.js';
import { newId } from './ids.js';

/** Connection status, delivered in order to `onStatus` listeners. */
export type ConnectionStatus =
  /** `frame`: the decoded value of a frame that failed validation (its owner may still act on it). */
  | { type: 'error'; code: Code; msg: string; fromPeer: boolean; frame?: unknown }
  | { type: 'close'; reason: string };

export interface ConnectionOptions {
  /** This end's name, written into `src`. */
  name: string;
  maxLine?: number;
  /** Bound on bytes waiting to be written to the peer; past it the peer is disconnected. */
  maxOutbound?: number;
  /** Bad frames tolerated before the peer is disconnected. */
  maxBadFrames?: number;
}

const FLUSH_BYTES = 64 * 1024;

/**
 * One protocol connection over a socket: framing, validation, batched writes, backpressure.
 * It owns the socket; the codec (`LineDecoder`/`MsgpackDecoder`) does no I/O.
 */
export class Connection {
  readonly socket: Socket;
  name: string;
  peer = '';
  codec: Codec = Codec.NDJSON;
  private decoder: Decoder;
  private out: Buffer[] = [];
  private outBytes = 0;
  private flushScheduled = false;
  private badFrames = 0;
  private lastBadAt = 0;
  private closed = false;
  private readonly maxLine: number;
  private readonly maxOutbound: number;
  private readonly maxBadFrames: number;
  private messageListener: (msg: AnyMessage) => void = () => {};
  private readonly statusListeners: ((s: ConnectionStatus) => void)[] = [];

  constructor(socket: Socket, opts: ConnectionOptions) {
    this.socket = socket;
    this.name = opts.name;
    this.maxLine = opts.maxLine ?? DEFAULT_MAX_LINE;
    this.maxOutbound = opts.maxOutbound ?? DEFAULT_MAX_OUTBOUND;
    this.maxBadFrames = opts.maxBadFrames ?? 16;
    this.decoder = new LineDecoder(this.sink, this.maxLine);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.decoder.push(chunk));
    socket.on('error', (err) => this.finish(`socket error: ${err.message}`));
    socket.on('close', () => this.finish('closed'));
    socket.on('end', () => { if (!this.closed) socket.end(); });
  }

  get isClosed(): boolean { return this.closed; }

  /** True when the socket can take more without growing its buffer past the high-water mark. */
  get writable(): boolean {
    return !this.closed && !this.socket.writableNeedDrain && this.outBytes < FLUSH_BYTES;
  }

  onMessage(fn: (msg: AnyMessage) => void): void { this.messageListener = fn; }
  onStatus(fn: (s: ConnectionStatus) => void): void { this.statusListeners.push(fn); }

  /** Switch codec for both directions; pending inbound bytes are re-read with the new codec. */
  setCodec(codec: Codec): void {
    if (codec === this.codec) return;
    this.flush();
    const rest = this.decoder.detach();
    this.codec = codec;
    this.decoder = codec === Codec.MSGPACK ? new MsgpackDecoder(this.sink, this.maxLine) : new LineDecoder(this.sink, this.maxLine);
    if (rest.length) this.decoder.push(rest);
  }

  /**
   * Queue a message; returns its id. Writes are batched and flushed once per event-loop turn
   * (setImmediate, not a microtask): a worker that finishes several short tasks in one turn, each
   * after its own awaits, sends their results in one write, so the peer wakes once for all of them.
   * `payloadJson`, when given, must be `JSON.stringify(payload)`: an NDJSON link sends it as it is
   * (one encoding shared by several links); a msgpack link encodes `payload`.
   */
  send<T extends Type>(type: T, payload: Payload<T>, opts: { re?: string; dst?: string; id?: string; payloadJson?: string } = {}): string {
    const id = opts.id ?? newId();
    if (this.closed) return id;
    const msg: Record<string, unknown> = { ver: PROTOCOL_VERSION, id, type, src: this.name, dst: opts.dst ?? this.peer, payload };
    if (opts.re !== undefined) msg.re = opts.re;
    let buf: Buffer;
    if (this.codec === Codec.MSGPACK) buf = encodeMsgpack(msg);
    else if (opts.payloadJson === undefined) buf = encodeLine(msg);
    // JSON.stringify leaves out an undefined field: the envelope, with the payload's text after it.
    else { msg.payload = undefined; buf = encodeLineWithPayload(msg, opts.payloadJson); }
    this.out.push(buf);
    this.outBytes += buf.length;
    if (this.socket.writableLength + this.outBytes > this.maxOutbound) {
      this.out = []; this.outBytes = 0;
      this.emitStatus({ type: 'error', code: 'SWARM_ERR_BACKPRESSURE', msg: `outbound buffer passed ${this.maxOutbound} bytes`, fromPeer: false });
      this.destroy('backpressure');
      return id;
    }
    if (this.outBytes >= FLUSH_BYTES) this.flush();
    else if (!this.flushScheduled) { this.flushScheduled = true; setImmediate(() => this.flush()); }
    return id;
  }

  /** Send an ERROR with a catalogue code; a fatal code also closes the connection. */
  sendError(code: Code, msg: string, opts: { re?: string; task_id?: string } = {}): void {
    const def = ErrorCode[code];
    const payload: Payload<'ERROR'> = { code, msg, status: def.status, fatal: def.fatal };
    if (opts.task_id !== undefined) payload.task_id = opts.task_id;
    this.send(Type.ERROR, payload, { re: opts.re });
    if (def.fatal) this.close(code);
  }

  /** Resolves when the socket has drained its buffer (or closed). */
  drained(): Promise<void> {
    this.flush();
    if (this.closed || !this.socket.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { this.socket.off('drain', done); this.socket.off('close', done); resolve(); };
      this.socket.once('drain', done);
      this.socket.once('close', done);
    });
  }

  flush(): void {
    this.flushScheduled = false;
    if (this.out.length === 0 || this.closed) return;
    const data = this.out.length === 1 ? this.out[0]! : Buffer.concat(this.out, this.outBytes);
    this.out = []; this.outBytes = 0;
    this.socket.write(data);
  }

  /** Flush what is queued, then end the socket. */
  close(reason = 'closed'): void {
    if (this.closed) return;
    this.flush();
    this.socket.end();
    const t = setTimeout(() => this.socket.destroy(), 2000);
    t.unref();
    this.finish(reason);
  }

  destroy(reason = 'destroyed'): void {
    this.socket.destroy();
    this.finish(reason);
  }

  private finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.emitStatus({ type: 'close', reason });
  }

  private emitStatus(s: ConnectionStatus): void {
    for (const fn of this.statusListeners) fn(s);
  }

  private readonly sink: FrameSink = {
    frame: (value) => {
      if (this.closed) return;
      const v = validate(value);
      if (v.ok) {
        if (v.msg.type === Type.ERROR) {
          this.emitStatus({ type: 'error', code: v.msg.payload.code, msg: v.msg.payload.msg, fromPeer: true });
        }
        this.messageListener(v.msg);
      } else {
        this.protocolError(v.code, v.msg, v.re, false, value);
      }
    },
    error: (code, msg, fatal, about) => {
      if (this.closed) return;
      this.protocolError(code, about?.task_id ? `${msg} (TASK_REQ of task ${about.task_id})` : msg, about?.re, fatal, undefined, about?.task_id);
    },
  };

  private protocolError(code: Code, msg: string, re?: string, fatal = false, frame?: unknown, taskId?: string): void {
    // Count bad frames within a minute of each other: a long-lived peer is not cut off for rare slips.
    const now = Date.now();
    if (now - this.lastBadAt > 60_000) this.badFrames = 0;
    this.lastBadAt = now;
    this.badFrames++;
    this.emitStatus({ type: 'error', code, msg, fromPeer: false, frame });
    if (this.closed) return;
    if (fatal || this.badFrames > this.maxBadFrames) {
      this.sendError('SWARM_ERR_TOO_MANY_ERRORS', `${this.badFrames} bad frames; last: ${code}`);
      return;
    }
    this.sendError(code, msg, { re, ...(taskId !== undefined ? { task_id: taskId } : {}) });
  }
}
