import type { Logger } from 'pino';

/** Lines of one kind of refusal logged one by one per window; the rest are counted. */
export const REFUSALS_PER_WINDOW = 10;
export const REFUSAL_WINDOW_MS = 10_000;

/**
 * Warnings about links nobody has admitted (a wrong token, no HANDSHAKE in time, a certificate not
 * accepted, an id in use): anyone who can reach the port causes them, with no token, thousands a
 * second. Logged one by one they grew hub.log without bound (600 KB/s from one local process
 * looping on a wrong token), and the log shares its disk with the journal, so the hub came to
 * refuse tasks for a full disk. Each kind (its message) is logged at most REFUSALS_PER_WINDOW times
 * per window; at the window's end one line says how many more there were and the last one's fields.
 */
export class RefusalLog {
  private readonly kinds = new Map<string, { logged: number; more: number; last?: object }>();

  constructor(private readonly log: Logger, private readonly perWindow = REFUSALS_PER_WINDOW, private readonly windowMs = REFUSAL_WINDOW_MS) {}

  warn(fields: object, msg: string): void {
    let k = this.kinds.get(msg);
    if (!k) {
      k = { logged: 0, more: 0 };
      this.kinds.set(msg, k);
      setTimeout(() => this.close(msg), this.windowMs).unref();
    }
    if (k.logged < this.perWindow) { k.logged++; this.log.warn(fields, msg); return; }
    k.more++;
    k.last = fields;
  }

  private close(msg: string): void {
    const k = this.kinds.get(msg);
    this.kinds.delete(msg);
    if (!k?.more) return;
    this.log.warn({ ...k.last, more: k.more, window_ms: this.windowMs }, `${msg} (and ${k.more} more in ${this.windowMs / 1000} s, not logged one by one)`);
  }
}
