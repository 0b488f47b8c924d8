import type { TLSSocket } from 'node:tls';
import type net from 'node:net';
import { Connection, ENDS_SOON_CAP, Type, safeEqual, randomId, workerCredential, type AnyMessage, type Message } from '../protocol/index.js';
import type { SessionDeps } from './context.js';
import type { Dispatcher } from './dispatcher.js';
import { WorkerEntry } from './registry.js';
import type { Results } from './results.js';
import { peerCertProblem, remoteOf } from './tls-refusal.js';

/**
 * Worker links: accept, authenticate (HANDSHAKE: the swarm token or the worker's own credential;
 * a live id is not taken over), route each frame to the part that handles it, and drop a worker
 * whose link closed or went silent (its leases go back to the queue at once).
 */
export class Sessions {
  constructor(private readonly hub: SessionDeps, private readonly dispatcher: Dispatcher, private readonly results: Results) {}

  /**
   * A connected worker heard from within this long is live: a HANDSHAKE with its id and without its
   * session is refused (SWARM_ERR_DUPLICATE_WORKER). Half the dead-after time: a half-open link is
   * given up sooner than the watchdog would, and still after more than two missed heartbeats.
   */
  get duplicateQuietMs(): number { return Math.floor(this.hub.config.deadAfterMs / 2); }

  accept(socket: net.Socket): void {
    const { config, metrics, registry } = this.hub;
    const conn = new Connection(socket, { name: this.hub.name, maxLine: config.maxLine, maxOutbound: config.maxOutbound });
    // Mutual TLS (hub.ts): a certificate the CA did not sign is refused here, before any frame is read.
    const why = config.tlsCa ? peerCertProblem(socket as Partial<TLSSocket>) : undefined;
    if (why) {
      this.hub.refusals.warn({ remote: remoteOf(socket), err: why }, 'worker link refused in the TLS handshake: its certificate is not accepted');
      conn.sendError('SWARM_ERR_AUTH', `this worker's certificate is not accepted (${why})`);
      return;
    }
    const timer = setTimeout(() => {
      this.hub.refusals.warn({ remote: remoteOf(socket), timeoutMs: config.handshakeTimeoutMs }, 'link refused: no HANDSHAKE in time');
      conn.sendError('SWARM_ERR_HANDSHAKE_TIMEOUT', `no HANDSHAKE within ${config.handshakeTimeoutMs} ms`);
    }, config.handshakeTimeoutMs);
    timer.unref();
    let worker: WorkerEntry | undefined;
    conn.onStatus((s) => {
      if (s.type === 'error' && !s.fromPeer) {
        metrics.protocolErrors.set(s.code, (metrics.protocolErrors.get(s.code) ?? 0) + 1);
        if (worker && s.frame !== undefined) this.results.onBadFrame(worker, s.frame, s.msg);
      }
      if (s.type === 'close') {
        clearTimeout(timer);
        if (worker && registry.get(worker.id) === worker) this.drop(worker, s.reason);
      }
    });
    conn.onMessage((msg) => {
      if (!worker) {
        if (msg.type !== Type.HANDSHAKE) { conn.sendError('SWARM_ERR_NOT_READY', 'send HANDSHAKE first', { re: msg.id }); return; }
        clearTimeout(timer);
        worker = this.handshake(conn, msg);
        // Switch codec only now: frames already buffered behind HANDSHAKE are re-read at once and
        // must find `worker` set.
        if (worker) conn.setCodec(this.codecFor(msg.payload.codecs));
        // Failover frames go out in the negotiated codec, so only after the switch.
        if (worker && msg.payload.peer_addr) this.hub.failover.join(worker, msg.payload.peer_addr, msg.payload.sync);
        // ASSIGN_ROLE, like failover frames, must go out in the negotiated codec.
        if (worker) this.hub.roles.joined(worker);
        return;
      }
      this.onWorkerMessage(worker, msg);
    });
  }

  /** Remove a worker: its leased tasks go back to the queue at once. */
  drop(w: WorkerEntry, reason: string, down = true): void {
    const { registry, failover, store, log } = this.hub;
    if (registry.get(w.id) !== w) return;
    registry.remove(w.id);
    this.dispatcher.left(w);
    w.left();
    failover.leave(w);
    // Its leases go back to the queue: the store's `requeued` events tell the replicas and wake the dispatcher.
    // One still waiting in its queue (leased ahead, or prefetched) never ran there: no attempt is used.
    let unstarted = 0;
    for (const [id, lease] of w.inflight) if (lease.startedAt === undefined && store.unlease(id, w.id)) unstarted++;
    const back = store.release(w.id);
    if (!w.conn.isClosed) w.conn.destroy(reason);
    log.info({ worker: w.id, reason, requeued: back.length + unstarted }, 'worker left');
    if (!this.hub.isStopping) this.hub.roles.left();
    if (down) this.hub.events.workerDown?.(w.id, reason);
  }

  private handshake(conn: Connection, msg: Message<'HANDSHAKE'>): WorkerEntry | undefined {
    const { config, registry, log } = this.hub;
    const p = msg.payload;
    const named = p.worker_id || msg.src;
    // The swarm token admits any id; a worker credential (protocol/auth.ts) only the id it was derived for.
    const token = config.token;
    if (token && !safeEqual(p.token, token) && !(named && safeEqual(p.token, workerCredential(token, named)))) {
      this.hub.refusals.warn({ remote: remoteOf(conn.socket), worker: named }, 'handshake refused: bad token');
      conn.sendError('SWARM_ERR_AUTH', p.token?.startsWith('wc1.') ? `credential is not the one of worker ${named ?? '(no worker_id)'}` : 'wrong or missing token', { re: msg.id });
      return undefined;
    }
    if (this.hub.isStopping) { conn.sendError('SWARM_ERR_SHUTDOWN', 'hub is stopping', { re: msg.id }); conn.close(); return undefined; }
    const id = named || `w-${randomId()}`;
    const now = Date.now();
    const old = registry.get(id);
    if (old) {
      // Same id as a connected worker (PROTOCOL.md 4.1): a reconnect that proves it is that worker
      // (its session), or whose old link has gone quiet (half-open after a cut), replaces it;
      // anything else is a live duplicate, or someone taking over an id, and is refused.
      const quietMs = now - old.lastSeen;
      const resumed = p.session !== undefined && safeEqual(p.session, old.session);
      if (!resumed && !old.conn.isClosed && quietMs <= this.duplicateQuietMs) {
        this.hub.refusals.warn({ worker: id, remote: remoteOf(conn.socket), quietMs }, 'handshake refused: worker id in use');
        conn.sendError('SWARM_ERR_DUPLICATE_WORKER', `worker ${id} is connected and was heard ${quietMs} ms ago`, { re: msg.id });
        return undefined;
      }
      // Not "down": the id is back at once, so the supervisor must not kill the process that just reconnected.
      this.drop(old, resumed ? 'replaced by its reconnect' : `replaced by a new connection (old link quiet for ${quietMs} ms)`, false);
    }
    // Leased ahead on its word when it gives it (cap ends-soon), by its mean run time only when asked.
    const leaseAheadMs = config.leaseAheadMs > 0 && (p.caps.includes(ENDS_SOON_CAP) || config.leaseAheadByMean) ? config.leaseAheadMs : 0;
    const w = new WorkerEntry({ id, role: p.role ?? '', driver: p.driver, caps: p.caps, slots: p.slots, queue: p.queue, prefetchBelowMs: config.prefetchBelowMs, leaseAheadMs, conn, pid: p.pid, host: p.host_id, session: randomId() + randomId(), engine: p.engine, failoverError: p.failover_error }, now);
    conn.peer = id;
    registry.add(w);
    const codec = this.codecFor(p.codecs);
    conn.send(Type.HANDSHAKE_ACK, {
      status: 'ok', worker_id: id, codec, session: w.session,
      config: { heartbeat_ms: config.heartbeatMs, dead_after_ms: config.deadAfterMs, ...(leaseAheadMs > 0 ? { lease_ahead_ms: leaseAheadMs } : {}) },
    }, { re: msg.id });
    conn.socket.on('drain', () => this.dispatcher.offer(w));
    log.info({ worker: id, driver: p.driver, slots: p.slots, role: w.role, codec }, 'worker joined');
    this.hub.events.workerUp?.(w);
    this.dispatcher.offer(w);
    return w;
  }

  private codecFor(offered: string[]): 'msgpack' | 'ndjson' {
    return this.hub.config.msgpack && offered.includes('msgpack') ? 'msgpack' : 'ndjson';
  }

  private onWorkerMessage(w: WorkerEntry, msg: AnyMessage): void {
    w.heard();
    switch (msg.type) {
      case Type.HEARTBEAT:
        // A word that a task ends soon, between the periodic beats: its other fields are not read (its
        // state would say BUSY until the next beat, though the task has ended by then).
        if (msg.payload.ending === true) { if (w.ending()) this.dispatcher.offer(w); return; }
        w.beat(msg.payload.load, msg.payload.state, msg.payload.engine, msg.payload.engine_error, msg.payload.engine_fallback);
        this.hub.failover.heartbeat(w, msg.payload);
        return;
      case Type.HANDBACK:
        // Only a worker that joined as a failover peer held a replica to hand back.
        if (!this.hub.failover.isPeer(w)) { w.conn.sendError('SWARM_ERR_UNEXPECTED', 'HANDBACK from a worker that did not join as a failover peer (no peer_addr)', { re: msg.id }); return; }
        void this.hub.failover.handBack(w, msg);
        return;
      case Type.SYNC_WANT:
        this.hub.failover.syncWant(w, msg);
        return;
      case Type.TASK_RES:
        this.results.onResult(w, msg);
        return;
      case Type.ERROR:
        this.results.onError(w, msg);
        return;
      case Type.ASSIGN_ROLE:
        this.hub.roles.selfAssigned(w, msg.payload.role);
        return;
      case Type.ACK:
        this.hub.roles.onAck(w, msg);
        return;
      default:
        w.conn.sendError('SWARM_ERR_UNEXPECTED', `hub does not accept ${msg.type} from a worker`, { re: msg.id });
    }
  }
}
