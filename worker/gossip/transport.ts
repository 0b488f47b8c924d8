import { WORKER_DEFAULTS, withDefaults } from '../config.js';
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { MsgpackDecoder, SwarmError, encodeMsgpack, every, safeEqual } from '../../protocol/index.js';
import type { GossipMsg, Transport } from './messages.js';

export interface TcpTransportOptions {
  /** Bind address; loopback by default. A non-loopback bind needs a token. */
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Shared secret; the same rule as the hub's: compared in constant time, required off loopback. */
  token?: string;
  /** Largest frame accepted or sent, bytes. */
  maxFrame?: number;
  /** Outbound connections kept open at most (least recently used closes first). */
  maxConns?: number;
  /** Outbound bytes buffered per connection before messages are dropped (gossip tolerates loss). */
  maxBuffered?: number;
  /** After a failed connect, messages to that address are dropped for this long. */
  downMs?: number;
  idleMs?: number;
  /** The address peers should dial, if not the bound one (a port forward, a proxy, a container). */
  advertise?: string;
  /** The host peers should dial, with the bound port (a wildcard bind on a machine others reach at this address). */
  advertiseHost?: string;
  /**
   * TLS on peer links, as on the hub's port: the peer port serves `cert`/`key`, and outgoing links
   * verify the peer's certificate against `ca` when one is given (like a worker's link to the hub).
   * Every member of a cluster must use TLS or none (a plain hello to a TLS port is refused).
   */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer };
  log?: Logger;
}

interface Out { sock: net.Socket; ready: boolean; queue: Buffer[]; used: number; closing?: boolean }

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Split "host:port" or "[v6]:port". */
export function parseAddr(addr: string): { host: string; port: number } {
  const m = /^\[(.+)\]:(\d+)$/.exec(addr) ?? /^([^:]+):(\d+)$/.exec(addr);
  if (!m) throw new SwarmError('SWARM_ERR_CONFIG', `bad peer address ${addr}`);
  return { host: m[1]!, port: Number(m[2]) };
}

function isMsg(v: unknown): v is GossipMsg {
  const m = v as GossipMsg;
  return !!m && typeof m === 'object' && typeof m.t === 'string' && typeof m.from === 'string' && typeof m.fa === 'string';
}

/**
 * Gossip over TCP: length-prefixed msgpack frames (the protocol's codec), one lazily opened
 * outbound connection per peer, opened with a hello frame carrying the token. Sending never
 * blocks or buffers without bound: over the bound, or while a peer is unreachable, messages are
 * dropped and counted, which SWIM is built to tolerate.
 */
export class TcpTransport implements Transport {
  private server?: net.Server;
  private address = '';
  private bound = '';
  private handler: (m: GossipMsg) => void = () => {};
  private readonly outs = new Map<string, Out>();
  private readonly down = new Map<string, number>();
  private readonly inbound = new Set<net.Socket>();
  /** Stops the idle reaper (on the process's clock: one wake-up for all the agents' transports). */
  private idleTimer?: () => void;
  private closed = false;
  readonly stats = { sent: 0, received: 0, dropped: 0, rejected: 0 };

  /** Bounds with defaults filled in (worker/config.ts). */
  private readonly cfg: typeof WORKER_DEFAULTS.transport;

  constructor(private readonly opts: TcpTransportOptions = {}) { this.cfg = withDefaults(WORKER_DEFAULTS.transport, opts); }

  /** The address peers dial (advertised). */
  get addr(): string { return this.address; }
  /** The address actually bound. */
  get boundAddr(): string { return this.bound; }
  /** Advertise another address from now on (set before the first message is sent). */
  advertiseAs(addr: string): void { this.address = addr; }

  /** Start listening; resolves with the address peers should dial. */
  async listen(): Promise<string> {
    const host = this.opts.host ?? '127.0.0.1';
    if (!LOOPBACK.has(host) && !this.opts.token) {
      throw new SwarmError('SWARM_ERR_INSECURE_BIND', `refusing to bind the peer port on ${host} without a token`);
    }
    const server = this.opts.tls
      ? tls.createServer({ cert: this.opts.tls.cert, key: this.opts.tls.key }, (s) => this.accept(s))
      : net.createServer((s) => this.accept(s));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port ?? 0, host, () => { server.off('error', reject); resolve(); });
    }).catch((err: NodeJS.ErrnoException) => {
      this.server = undefined;
      // A taken port or no local port left (EADDRINUSE, EADDRNOTAVAIL) is said as what it is.
      const why = err.code === 'EADDRINUSE' && this.opts.port ? `port ${this.opts.port} is taken`
        : err.code === 'EADDRINUSE' || err.code === 'EADDRNOTAVAIL' ? 'no free local port is left' : err.message;
      throw new SwarmError('SWARM_ERR_PEER_PORT', `cannot open the failover peer port on ${host}:${this.opts.port ?? 0}: ${why} (${err.code ?? 'error'})`, { cause: err });
    });
    const a = server.address() as net.AddressInfo;
    this.bound = a.family === 'IPv6' ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
    this.address = this.opts.advertise ?? (this.opts.advertiseHost ? `${net.isIPv6(this.opts.advertiseHost) ? `[${this.opts.advertiseHost}]` : this.opts.advertiseHost}:${a.port}` : this.bound);
    this.idleTimer = every(Math.max(1000, Math.round(this.cfg.idleMs / 2)), () => this.reapIdle());
    return this.address;
  }

  onMessage(fn: (msg: GossipMsg) => void): void { this.handler = fn; }

  send(to: string, msg: GossipMsg): void {
    if (this.closed) return;
    const downUntil = this.down.get(to);
    if (downUntil !== undefined && Date.now() < downUntil) { this.stats.dropped++; return; }
    let frame: Buffer;
    try { frame = encodeMsgpack(msg); } catch { this.stats.dropped++; return; }
    if (frame.length - 4 > this.maxFrame) {
      this.opts.log?.warn({ to, bytes: frame.length, t: msg.t }, 'gossip frame over the bound, dropped');
      this.stats.dropped++;
      return;
    }
    const out = this.outs.get(to) ?? this.connect(to);
    if (!out) { this.stats.dropped++; return; }
    out.used = Date.now();
    if (!out.ready) {
      if (out.queue.length >= 256) { this.stats.dropped++; return; }
      out.queue.push(frame);
      return;
    }
    if (out.sock.writableLength > this.cfg.maxBuffered) { this.stats.dropped++; return; }
    out.sock.write(frame);
    this.stats.sent++;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.idleTimer?.();
    for (const o of this.outs.values()) o.sock.destroy();
    this.outs.clear();
    for (const s of this.inbound) s.destroy();
    this.inbound.clear();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  private get maxFrame(): number { return this.cfg.maxFrame; }

  private connect(to: string): Out | undefined {
    let target: { host: string; port: number };
    try { target = parseAddr(to); } catch { return undefined; }
    if (this.outs.size >= this.cfg.maxConns) this.evictOldest();
    const t = this.opts.tls;
    const sock: net.Socket = t
      ? tls.connect({ host: target.host, port: target.port, ca: t.ca, rejectUnauthorized: t.ca !== undefined, servername: net.isIP(target.host) ? undefined : target.host })
      : net.connect({ host: target.host, port: target.port });
    sock.setNoDelay(true);
    const out: Out = { sock, ready: false, queue: [], used: Date.now() };
    this.outs.set(to, out);
    sock.on(t ? 'secureConnect' : 'connect', () => {
      out.ready = true;
      // The hello names our address so the peer can answer on this same connection.
      sock.write(encodeMsgpack({ hello: 1, token: this.opts.token, addr: this.address }));
      for (const f of out.queue) { sock.write(f); this.stats.sent++; }
      out.queue = [];
      if (out.closing) sock.end();
    });
    sock.on('error', () => {
      if (!out.ready) this.down.set(to, Date.now() + this.cfg.downMs);
    });
    sock.on('close', () => { if (this.outs.get(to) === out) this.outs.delete(to); });
    // We dialed this peer, so what it sends back on this connection needs no hello.
    const dec = new MsgpackDecoder({ frame: (v) => this.deliver(v), error: () => sock.destroy() }, this.maxFrame);
    sock.on('data', (c) => dec.push(c));
    return out;
  }

  private accept(s: net.Socket): void {
    if (this.closed) { s.destroy(); return; }
    s.setNoDelay(true);
    this.inbound.add(s);
    let authed = false;
    let refused = false;
    const dec = new MsgpackDecoder({
      frame: (v) => {
        if (refused) return;
        if (!authed) {
          const h = v as { hello?: number; token?: string };
          if (h?.hello !== 1 || (this.opts.token !== undefined && !safeEqual(h.token, this.opts.token))) {
            this.stats.rejected++;
            refused = true;
            s.destroy();
            return;
          }
          authed = true;
          const back = (v as { addr?: unknown }).addr;
          if (typeof back === 'string' && !this.outs.has(back) && this.outs.size < this.cfg.maxConns) {
            // Reuse this connection for traffic to the dialer (acks, mostly): half the connections.
            const out: Out = { sock: s, ready: true, queue: [], used: Date.now() };
            this.outs.set(back, out);
            s.on('close', () => { if (this.outs.get(back) === out) this.outs.delete(back); });
          }
          return;
        }
        this.deliver(v);
      },
      error: () => { s.destroy(); },
    }, this.maxFrame);
    s.on('data', (c) => dec.push(c));
    s.on('error', () => {});
    s.on('close', () => this.inbound.delete(s));
  }

  private deliver(v: unknown): void {
    if (!isMsg(v)) return;
    this.stats.received++;
    try { this.handler(v); } catch (err) { this.opts.log?.warn({ err }, 'gossip handler failed'); }
  }

  private evictOldest(): void {
    let oldest: [string, Out] | undefined;
    for (const e of this.outs) if (!oldest || e[1].used < oldest[1].used) oldest = e;
    if (!oldest) return;
    // Graceful: what was already written (or queued while connecting) still goes out.
    const [to, o] = oldest;
    this.outs.delete(to);
    o.closing = true;
    if (o.ready) o.sock.end();
  }

  private reapIdle(): void {
    const cutoff = Date.now() - this.cfg.idleMs;
    for (const [to, o] of this.outs) if (o.used < cutoff) { o.sock.end(); this.outs.delete(to); }
  }
}
