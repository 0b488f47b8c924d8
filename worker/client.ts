import { WORKER_DEFAULTS } from './config.js';
import net from 'node:net';
import pRetry from 'p-retry';
import type { Logger } from 'pino';
import { Connection, SwarmError, Type, every, type AnyMessage, type Message, type Payload } from '../protocol/index.js';
import { refusal } from './refusal.js';
import type { HubLinkState } from './gossip/hub-monitor.js';

/** After a joined link is lost: dial again every 100-200 ms for 15 s before backing off (`redial`). */
const REDIAL_MS = 100;
const REDIAL_FOR_MS = 15_000;

/** Where the hub is; called before every (re)connect so a restarted hub on a new port is found. */
export type HubLocator = () => Promise<HubAddress>;

/**
 * A hub to dial. With `tls`, its certificate is always verified: against `ca` (chain and host name),
 * or by `pin` (its SHA-256 fingerprint), or both; a TLS link with neither is refused before any
 * byte of the token is sent, since it would hand the token to whoever answers.
 */
export interface HubAddress { host: string; port: number; tls?: boolean; ca?: string; pin?: string; cert?: string; key?: string }

/** A SHA-256 fingerprint as hex without separators, upper case (`AB:CD:…`, `sha256:abcd…` accepted). */
export function normalizePin(pin: string): string { return pin.replace(/^sha256:/i, '').replace(/[^0-9a-f]/gi, '').toUpperCase(); }

export type ClientStatus =
  | { type: 'connected'; workerId: string }
  | { type: 'disconnected'; reason: string }
  | { type: 'reconnecting'; attempt: number; error: string }
  | { type: 'killed'; reason: string }
  /** Refused (wrong token or certificate) before ever joining: the loop has ended. */
  | { type: 'refused'; error: SwarmError };

export interface ClientOptions {
  id: string;
  locate: HubLocator;
  handshake: () => Omit<Payload<'HANDSHAKE'>, 'codecs'>;
  token?: string;
  maxLine?: number;
  msgpack?: boolean;
  /** Give up handshaking after this long and retry. */
  handshakeTimeoutMs?: number;
  /** Reconnect backoff bounds. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * The worker's network loop: connects, handshakes, heartbeats on its own timer (never behind a
 * generation), notices a silent hub, and reconnects with jittered backoff.
 */
export class WorkerClient {
  conn?: Connection;
  /** From the last HANDSHAKE_ACK; `lease_ahead_ms` 0: the hub leases no task ahead (4.6). */
  config = { heartbeat_ms: 2000, dead_after_ms: 10000, lease_ahead_ms: 0 };
  private stopped = false;
  /** Joined a hub at least once: a refusal after that may be a hub restarting misconfigured, and is retried. */
  private joined = false;
  /** Stops this link's heartbeat on the process's shared clock. */
  private stopBeat?: () => void;
  private lastHeard = 0;
  /** In `redial`: a hub just lost is being dialed again. */
  private redialing = false;
  /** The session of the last HANDSHAKE_ACK: a reconnect presents it, so a half-open old link does not block it. */
  private session?: string;
  /** Frames that arrived between HANDSHAKE_ACK and serve(). */
  private early: AnyMessage[] = [];
  private readonly listeners: ((s: ClientStatus) => void)[] = [];
  private messageHandler: (msg: AnyMessage, conn: Connection) => void = () => {};
  heartbeatPayload: () => Payload<'HEARTBEAT'> = () => ({ load: 0, status: 'idle' });
  /** Called for every frame from the hub, heartbeats included (failover's hub monitor listens). */
  onFrame: (m: AnyMessage) => void = () => {};
  /** A link's way to its HANDSHAKE_ACK: held by the hub's port, then answered, cut or timed out (failover's hub monitor listens). */
  onLink: (s: HubLinkState) => void = () => {};

  constructor(private readonly opts: ClientOptions, private readonly log: Logger) {}

  onStatus(fn: (s: ClientStatus) => void): void { this.listeners.push(fn); }
  onMessage(fn: (msg: AnyMessage, conn: Connection) => void): void { this.messageHandler = fn; }

  /** Run sessions until stop(): connect, serve, and on loss reconnect. */
  async run(): Promise<void> {
    let lostAt: number | undefined;
    while (!this.stopped) {
      let attempt = 0;
      try {
        // A hub that gave up waiting for this link's HANDSHAKE (a loaded host) is up and answering: try
        // again at once, not after a backoff that grows with every such miss.
        const once = () => this.connectOnce().catch((err: unknown) => {
          if (this.stopped || !(err instanceof SwarmError && err.code === 'SWARM_ERR_HANDSHAKE_TIMEOUT')) throw err;
          this.log.info('the hub timed out this link before its HANDSHAKE arrived; connecting again at once');
          return this.connectOnce();
        });
        const failed = (error: unknown) => {
          attempt++;
          this.emit({ type: 'reconnecting', attempt, error: (error as Error)?.message ?? String(error) });
        };
        const conn = (lostAt === undefined ? undefined : await this.redial(once, lostAt, failed)) ?? await pRetry(once, {
          retries: Number.POSITIVE_INFINITY,
          minTimeout: this.opts.minBackoffMs ?? WORKER_DEFAULTS.client.minBackoffMs,
          maxTimeout: this.opts.maxBackoffMs ?? WORKER_DEFAULTS.client.maxBackoffMs,
          factor: 2,
          randomize: true,
          shouldRetry: (ctx) => !this.stopped && (this.joined || !refusal(ctx.error)),
          onFailedAttempt: (ctx) => failed((ctx as unknown as { error?: Error }).error ?? ctx),
        });
        const reason = await this.serve(conn);
        lostAt = Date.now();
        this.emit({ type: 'disconnected', reason });
      } catch (err) {
        if (this.stopped) break;
        const refused = this.joined ? undefined : refusal(err);
        if (refused) {
          this.stopped = true;
          this.emit({ type: 'refused', error: refused });
          break;
        }
        this.log.warn({ err }, 'connect loop failed');
      }
    }
  }

  /**
   * Right after a joined link is lost, the hub is most likely restarting (killed, or rolled out), and
   * its port opens again within seconds: dial every REDIAL_MS (jittered) while the port is closed or
   * the link is cut, for REDIAL_FOR_MS, so the worker is back within a fraction of a second of the
   * new hub binding. The backoff, which grew to its 2 s bound while the port was closed, had it wait
   * up to that long more (25 workers back 1.5-2.5 s after the new hub bound). Anything else (a
   * refusal, an ERROR) and the end of the window go on to the backoff. Undefined: not connected.
   */
  private async redial(once: () => Promise<Connection>, lostAt: number, failed: (err: unknown) => void): Promise<Connection | undefined> {
    this.redialing = true;
    let closed = false;
    try {
      while (!this.stopped && Date.now() - lostAt < REDIAL_FOR_MS) {
        // While the port is closed, a bare connect asks whether it opened: a HANDSHAKE is made for each
        // real attempt, and a replica holder's (its digest, a pass over its copy, new whenever the copy
        // changed, as it does in gossip mode) made ten times a second starved the process.
        const why = closed ? await this.portClosed() : undefined;
        if (why === undefined) {
          try { return await once(); } catch (err) {
            if (this.stopped || err instanceof SwarmError) return undefined;
            closed = (err as NodeJS.ErrnoException).code === 'ECONNREFUSED';
            failed(err);
          }
        } else failed(why);
        await new Promise((r) => setTimeout(r, REDIAL_MS * (1 + Math.random())));
      }
      return undefined;
    } finally { this.redialing = false; }
  }

  /**
   * Whether the hub's port still refuses a connection (the error), by a bare TCP connect closed at once:
   * no HANDSHAKE is made for it, and a hub that has bound reads nothing from it. A TLS hub is not asked
   * (it would log a link that left in its TLS handshake): undefined, as for an open port.
   */
  private async portClosed(): Promise<Error | undefined> {
    let where: HubAddress;
    try { where = await this.opts.locate(); } catch { return undefined; }
    if (where.tls) return undefined;
    return new Promise((resolve) => {
      const s = net.connect({ host: where.host, port: where.port }, () => { s.destroy(); resolve(undefined); });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED' ? err : undefined));
    });
  }

  /**
   * How long a HANDSHAKE waits for its ACK. While redialing a hub just lost, a link that connects is
   * most likely a restarted hub that bound its port and is still replaying its journal (seconds on a
   * loaded host; hub.ts holds the link unread until then): it is given REDIAL_FOR_MS, not the few
   * seconds that would cut it and dial again, each cut link then read and answered by the new hub.
   */
  private handshakeWaitMs(): number {
    const base = this.opts.handshakeTimeoutMs ?? WORKER_DEFAULTS.client.handshakeTimeoutMs;
    return this.redialing ? Math.max(base, REDIAL_FOR_MS) : base;
  }

  stop(): void {
    this.stopped = true;
    this.stopBeat?.();
    this.conn?.close('worker stopping');
  }

  get isStopped(): boolean { return this.stopped; }

  private async connectOnce(): Promise<Connection> {
    if (this.stopped) throw new Error('stopped');
    this.early = [];
    const where = await this.opts.locate();
    // Before connecting: the hub gives a new link a few seconds to say HANDSHAKE, and what it carries
    // (a replica holder's digest of its copy, a pass over its history) took most of them on a loaded host.
    const hs = this.opts.handshake();
    const tls = where.tls ? await import('node:tls') : undefined; // only a TLS link pays for loading it
    if (tls && where.ca === undefined && where.pin === undefined) {
      throw new SwarmError('SWARM_ERR_CONFIG', `TLS to ${where.host}:${where.port} without --tls-ca or --tls-pin: the hub's certificate could not be verified and the token would go to whoever answers; give the CA that signed it (swarm certs: ca.crt) or its SHA-256 fingerprint`);
    }
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s: net.Socket = tls
        // cert/key: this worker's own certificate, for a hub that asks for one (mutual TLS).
        ? tls.connect({ host: where.host, port: where.port, ca: where.ca, cert: where.cert, key: where.key, rejectUnauthorized: where.ca !== undefined, servername: net.isIP(where.host) ? undefined : where.host }, () => {
          const bad = where.pin === undefined ? undefined : pinMismatch(s as import('node:tls').TLSSocket, where.pin);
          if (bad) { s.destroy(); reject(bad); } else resolve(s);
        })
        : net.connect({ host: where.host, port: where.port }, () => resolve(s));
      s.once('error', reject);
    });
    // A hub refusing this worker's certificate under TLS 1.3 does so after our side finished the
    // handshake: the alert arrives as a socket error, whose code tells a refusal from a reset.
    let socketError: NodeJS.ErrnoException | undefined;
    socket.on('error', (err: NodeJS.ErrnoException) => { socketError = err; });
    const conn = new Connection(socket, { name: this.opts.id, maxLine: this.opts.maxLine });
    // The port accepted: until this link is answered, the hub is taken as restarting, not gone.
    let linkState: HubLinkState = 'held';
    const link = (s: HubLinkState) => { if (linkState !== 'held') return; linkState = s; this.onLink(s); };
    this.onLink('held');
    const ack = await new Promise<Message<'HANDSHAKE_ACK'>>((resolve, reject) => {
      // Decided after a turn of the loop: a process that was starved (a loaded host) runs its due
      // timers before it reads its sockets, and the ACK may be waiting in this one.
      const t = setTimeout(() => setImmediate(() => {
        if (conn.isClosed || linkState !== 'held') return; // answered or closed meanwhile
        link('timeout');
        conn.destroy('handshake timeout'); reject(new Error('handshake timeout'));
      }), this.handshakeWaitMs());
      conn.onStatus((s) => {
        if (s.type !== 'close') return;
        clearTimeout(t);
        // A hub that wrote something before closing (an ERROR, a refusal) is there; a silent close is a cut.
        link(socket.bytesRead > 0 ? 'answered' : 'cut');
        const closed = Object.assign(new Error(`closed during handshake: ${s.reason}`), { code: socketError?.code });
        // A TLS hub drops a plain link without a byte: ask it (a bare TLS handshake, no token sent)
        // whether it speaks TLS, else this worker retries forever what can never work.
        if (tls || socket.bytesRead > 0) { reject(closed); return; }
        void speaksTls(where.host, where.port).then((yes) => reject(yes
          ? new SwarmError('SWARM_ERR_AUTH', `the hub at ${where.host}:${where.port} speaks TLS and this worker connected in plain TCP: give --tls with --tls-ca (or --tls-pin)`)
          : closed));
      });
      conn.onMessage((m) => {
        if (m.type === Type.HANDSHAKE_ACK) {
          clearTimeout(t); link('answered');
          // Switch now, inside this frame's callback: the hub may already have sent the next frame
          // in the new codec, in the same read. Frames before serve() starts are kept, not dropped.
          conn.onMessage((next) => this.early.push(next)); // before setCodec: it re-reads buffered bytes at once
          conn.setCodec(m.payload.codec);
          resolve(m);
        }
        else if (m.type === Type.ERROR) { clearTimeout(t); link('answered'); reject(new SwarmError(m.payload.code, `${m.payload.code}: ${m.payload.msg}`)); }
      });
      conn.send(Type.HANDSHAKE, { ...hs, token: this.opts.token, session: this.session, codecs: this.opts.msgpack === false ? ['ndjson'] : ['msgpack', 'ndjson'] });
    });
    conn.peer = ack.src;
    this.session = ack.payload.session;
    this.config = { heartbeat_ms: ack.payload.config.heartbeat_ms, dead_after_ms: ack.payload.config.dead_after_ms, lease_ahead_ms: ack.payload.config.lease_ahead_ms ?? 0 };
    return conn;
  }

  private serve(conn: Connection): Promise<string> {
    this.conn = conn;
    this.joined = true;
    this.lastHeard = Date.now();
    this.emit({ type: 'connected', workerId: this.opts.id });
    return new Promise((resolve) => {
      conn.onStatus((s) => {
        if (s.type === 'close') {
          this.stopBeat?.();
          resolve(s.reason);
        }
      });
      const onMessage = (m: AnyMessage): void => {
        this.lastHeard = Date.now();
        this.onFrame(m);
        if (m.type === Type.KILL) {
          this.emit({ type: 'killed', reason: m.payload.reason });
          return;
        }
        if (m.type === Type.HEARTBEAT) return;
        this.messageHandler(m, conn);
      };
      conn.onMessage(onMessage);
      const early = this.early;
      this.early = [];
      for (const m of early) onMessage(m);
      this.stopBeat?.();
      // On the process's clock: the agents of one process beat in one wake-up (protocol/shared-clock.ts).
      this.stopBeat = every(this.config.heartbeat_ms, () => {
        if (Date.now() - this.lastHeard > this.config.dead_after_ms) {
          // Half-open link or a dead hub: drop it and reconnect.
          conn.destroy(`hub silent for ${Date.now() - this.lastHeard} ms`);
          return;
        }
        conn.send(Type.HEARTBEAT, this.heartbeatPayload());
      });
      conn.send(Type.HEARTBEAT, this.heartbeatPayload());
    });
  }

  private emit(s: ClientStatus): void {
    for (const fn of this.listeners) fn(s);
  }
}

/** The error for a hub whose certificate is not the pinned one (undefined: it is). */
function pinMismatch(s: import('node:tls').TLSSocket, pin: string): NodeJS.ErrnoException | undefined {
  const got = normalizePin(s.getPeerCertificate()?.fingerprint256 ?? '');
  if (got !== '' && got === normalizePin(pin)) return undefined;
  return Object.assign(new Error(`the hub's certificate (SHA-256 ${got || 'none'}) is not the pinned one`), { code: 'CERT_PIN_MISMATCH' });
}

/** True if a TLS handshake with host:port completes (nothing is sent over it; the certificate is not judged). */
async function speaksTls(host: string, port: number, timeoutMs = 2000): Promise<boolean> {
  const tls = await import('node:tls');
  return new Promise((resolve) => {
    const s = tls.connect({ host, port, rejectUnauthorized: false, servername: net.isIP(host) ? undefined : host }, () => { s.end(); resolve(true); });
    s.setTimeout(timeoutMs, () => { s.destroy(); resolve(false); });
    s.once('error', () => resolve(false));
  });
}
