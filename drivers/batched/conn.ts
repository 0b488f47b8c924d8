import type net from 'node:net';
import { SwarmError } from '../../protocol/index.js';
import { MAX_LINE, type FromEngine, type ToEngine } from './messages.js';

/** Events of the chat running on a connection; `gone` when the connection closed under it. */
export type ChatEvent = Extract<FromEngine, { id: number }> | { t: 'gone' };

/**
 * One connection to the batched engine, owning one of its sequences (from the `seq` greeting until
 * it closes). The engine runs its chats one at a time, in the order sent: one running and, leased
 * ahead, one queued behind it; each chat's events go to its own listener. The engine frees the
 * sequence when the connection closes.
 */
export class SeqConn {
  seq: number | undefined;
  /** The engine's pid, from its greeting. */
  enginePid: number | undefined;
  closed = false;
  /** We closed it (stop), as opposed to the engine going away. */
  private ours = false;
  private buf = '';
  private readonly listeners = new Map<number, (e: ChatEvent) => void>();
  private readonly greeted: Promise<void>;

  constructor(private readonly sock: net.Socket) {
    let greet!: { resolve: () => void; reject: (e: Error) => void };
    this.greeted = new Promise((resolve, reject) => { greet = { resolve, reject }; });
    this.greeted.catch(() => {});
    sock.setEncoding('utf8');
    sock.on('data', (text: string) => {
      this.buf += text;
      if (this.buf.length > MAX_LINE && !this.buf.includes('\n')) { sock.destroy(); return; }
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        let m: FromEngine;
        try { m = JSON.parse(line) as FromEngine; } catch { continue; }
        if (m.t === 'seq') { this.seq = m.seq; this.enginePid = m.pid; greet.resolve(); }
        else if (m.t === 'refused') greet.reject(new SwarmError('SWARM_ERR_ENGINE_START', `batched engine: ${m.message}`));
        else this.listeners.get(m.id)?.(m);
      }
    });
    sock.on('error', () => {});
    sock.on('close', () => {
      this.closed = true;
      greet.reject(new SwarmError(this.ours ? 'SWARM_ERR_SHUTDOWN' : 'SWARM_ERR_ENGINE_DIED', 'the batched engine closed the connection before it gave a sequence'));
      for (const f of [...this.listeners.values()]) f({ t: 'gone' });
    });
    // An idle worker must not be kept alive by its engine link; a chat holds the loop (hold()).
    sock.unref();
  }

  /** Resolves once the engine gave this connection a sequence (it may wait for one to free up). */
  ready(): Promise<void> { return this.greeted; }

  get closedByUs(): boolean { return this.ours; }

  /** Route chat `id`'s events to `f` (undefined: to no one; events of a chat given up on are dropped). */
  listen(id: number, f: ((e: ChatEvent) => void) | undefined): void {
    if (f) this.listeners.set(id, f);
    else this.listeners.delete(id);
  }

  send(m: ToEngine): boolean {
    if (this.closed || this.sock.destroyed) return false;
    this.sock.write(JSON.stringify(m) + '\n');
    return true;
  }

  hold(): () => void {
    this.sock.ref();
    let held = true;
    return () => { if (held) { held = false; this.sock.unref(); } };
  }

  close(): void {
    this.ours = true;
    this.sock.destroy();
  }
}
