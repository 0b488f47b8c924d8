import net from 'node:net';
import { LineDecoder, MsgpackDecoder, encodeLine, encodeMsgpack, newId, type Decoder } from '../../protocol/index.js';

/** A frame as received: a decoded object, or a framing error the decoder reported. */
export type Frame = Record<string, any>;

/**
 * A hand-driven worker on a raw socket, for tests that need to send what a well-behaved worker
 * never would (out-of-order chunks, bad ERRORs, 64-bit ints, a second connection with a live id).
 */
export class RawWorker {
  readonly frames: Frame[] = [];
  closed = false;
  private decoder: Decoder;
  private waiters: (() => void)[] = [];
  codec: 'ndjson' | 'msgpack' = 'ndjson';
  /** Called with each frame as it is decoded, before anything else sees it (a test that cuts the link at an exact frame). */
  onFrame?: (f: Frame) => void;

  private constructor(readonly sock: net.Socket) {
    this.decoder = this.lineDecoder();
    sock.on('data', (c: Buffer) => this.decoder.push(c));
    sock.on('error', () => {});
    sock.on('close', () => { this.closed = true; this.wake(); });
  }

  static async connect(addr: { host: string; port: number }): Promise<RawWorker> {
    const sock = net.connect(addr);
    await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
    return new RawWorker(sock);
  }

  /** Connected and admitted as worker `id` with its credential (a failover peer address given); throws if refused. */
  static async join(addr: { host: string; port: number }, id: string, token: string): Promise<RawWorker> {
    const w = await RawWorker.connect(addr);
    const ack = await w.handshake({ worker_id: id, token, slots: 1, peer_addr: '127.0.0.1:9' });
    if (ack?.type !== 'HANDSHAKE_ACK') { w.destroy(); throw new Error(`${id} not admitted: ${JSON.stringify(ack)}`); }
    return w;
  }

  /** A HANDBACK of these entries, and the hub's answer to it. */
  async handBack(entries: unknown[]): Promise<Frame> {
    const m = this.send('HANDBACK', { entries });
    return this.next((f) => f.re === m);
  }

  /** HANDSHAKE and wait for the reply (HANDSHAKE_ACK or ERROR); switches codec on an ACK. */
  async handshake(payload: Record<string, unknown>, ms = 5000): Promise<Frame> {
    const id = newId();
    this.sock.write(encodeLine({ ver: 1, id, type: 'HANDSHAKE', src: String(payload.worker_id ?? ''), dst: '', payload: { driver: 'raw', codecs: ['ndjson'], ...payload } }));
    const reply = await this.next((f) => f.re === id, ms);
    return reply;
  }

  /** Send one message in the current codec; `raw` bytes go out as they are. */
  send(type: string, payload: unknown, opts: { re?: string; id?: string } = {}): string {
    const id = opts.id ?? newId();
    const msg: Record<string, unknown> = { ver: 1, id, type, src: '', dst: '', payload };
    if (opts.re) msg.re = opts.re;
    this.sock.write(this.codec === 'msgpack' ? encodeMsgpack(msg) : encodeLine(msg));
    return id;
  }

  write(bytes: Buffer | string): void { this.sock.write(bytes); }

  /** The first frame (already received or coming) that matches; undefined on timeout or close. */
  async next(match: (f: Frame) => boolean, ms = 5000): Promise<Frame> {
    const deadline = Date.now() + ms;
    for (;;) {
      const f = this.frames.find(match);
      if (f) return f;
      if (this.closed || Date.now() > deadline) return undefined as unknown as Frame;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  /** Resolves true once the hub has closed the connection (bounded). */
  async waitClosed(ms = 5000): Promise<boolean> {
    await this.next(() => false, ms);
    return this.closed;
  }

  destroy(): void { this.sock.destroy(); }

  private lineDecoder(): Decoder {
    return new LineDecoder({
      frame: (v) => {
        const f = v as Frame;
        this.onFrame?.(f);
        this.frames.push(f);
        if (f?.type === 'HANDSHAKE_ACK' && f.payload?.codec === 'msgpack') {
          this.codec = 'msgpack';
          const rest = this.decoder.detach();
          this.decoder = new MsgpackDecoder({ frame: (x) => { this.frames.push(x as Frame); this.wake(); }, error: (code) => { this.frames.push({ decodeError: code }); this.wake(); } });
          this.decoder.push(rest);
        }
        this.wake();
      },
      error: (code) => { this.frames.push({ decodeError: code }); this.wake(); },
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }
}
