import type http from 'node:http';

export interface SseLimits {
  /** Bytes a client may have waiting in the hub (its socket's buffer); past this it is behind. */
  maxBufferedBytes: number;
  /** A client behind for this long is dropped (its browser reconnects and gets a fresh snapshot). */
  stallMs: number;
}

/** What happened to one message offered to a client. */
export type Offer = 'sent' | 'skipped' | 'dropped';

/**
 * One server-sent-events client with a bounded queue: the only queue is the socket's own buffer,
 * and nothing more is written once it holds `maxBufferedBytes`. A client that falls behind skips
 * messages and, once its socket drains, gets one fresh snapshot (`resync`) in their place: the
 * messages it missed are coalesced. Behind for longer than `stallMs`, it is dropped.
 */
export class SseClient {
  private behindSince?: number;
  closed = false;
  /** Messages skipped while behind (for stats and tests). */
  skipped = 0;
  /** Largest buffer seen, in bytes. */
  peakBuffered = 0;

  constructor(
    private readonly res: http.ServerResponse,
    private readonly limits: SseLimits,
    private readonly resync: () => string,
    private readonly onClose: (c: SseClient, why: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no', connection: 'keep-alive',
    });
    res.socket?.setNoDelay(true);
    res.write('retry: 1000\n\n');
    res.on('close', () => this.close('client closed'));
    res.on('drain', () => {
      if (this.behindSince === undefined || this.closed) return;
      this.behindSince = undefined;
      this.write(this.resync());
    });
  }

  get buffered(): number { return this.res.writableLength; }
  get behind(): boolean { return this.behindSince !== undefined; }

  /** Offer one encoded message (see `frame`). */
  offer(data: string): Offer {
    if (this.closed) return 'dropped';
    if (this.behindSince !== undefined || this.res.writableLength > this.limits.maxBufferedBytes) {
      this.behindSince ??= this.now();
      this.skipped++;
      if (this.now() - this.behindSince > this.limits.stallMs) { this.close('stalled'); return 'dropped'; }
      return 'skipped';
    }
    this.write(data);
    return 'sent';
  }

  private write(data: string): void {
    this.res.write(data);
    if (this.res.writableLength > this.peakBuffered) this.peakBuffered = this.res.writableLength;
  }

  /** End the stream; `hard` (a stalled client, a closing hub) throws away what is still buffered. */
  close(why: string, hard = why === 'stalled'): void {
    if (this.closed) return;
    this.closed = true;
    // destroy, not end, for a stalled socket: it would keep its buffer until the kernel gives up on it.
    if (hard) this.res.destroy();
    else if (why !== 'client closed') this.res.end();
    this.onClose(this, why);
  }
}

/** One SSE message: `event`, optional `id`, JSON data on one line. */
export function frame(event: string, data: unknown, id?: number): string {
  return `event: ${event}\n${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
}
