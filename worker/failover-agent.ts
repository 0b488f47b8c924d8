import type { Logger } from 'pino';
import { WORKER_DEFAULTS, type WorkerConfig } from './config.js';
import { Type, every, type AnyMessage, type Connection, type Payload, type Receipt } from '../protocol/index.js';
import {
  FailoverController, GossipNode, GossipRuns, Mode, TcpTransport,
  type Entry, type Execute, type MembershipConfig, type HubMonitorOptions, type HubLinkState, type NodeStatus,
} from './gossip/index.js';
import { HubCopy } from './hub-copy.js';
import type { HandbackDigest } from './gossip/handback-digest.js';

/** Failover settings of one agent (`swarm worker --failover`). */
export interface AgentFailoverOptions {
  /** Peer port bind address (loopback by default; off loopback needs a token). */
  host?: string;
  port?: number;
  /** The address peers should dial, if not the bound one (a proxy, a port forward). */
  advertise?: string;
  /** The host peers should dial, with the bound port (the address other machines reach this one at). */
  advertiseHost?: string;
  /** TLS on the peer port and peer links (the hub's rules: see `TcpTransportOptions.tls`). */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer };
  membership?: Partial<MembershipConfig>;
  /** Overrides of the hub monitor's settings (tests); the rest come from `config`. */
  hubMonitor?: HubMonitorOptions;
  /** Secret of the peer links, when the agent's hub token is its own credential (not shared by peers). */
  peerToken?: string;
  /** The worker's validated settings (worker/config.ts): timings, bounds, handback sizes. */
  config?: WorkerConfig;
  /** This worker's credential key (protocol/result-mac.ts `workerKey`): its results carry its MAC. */
  resultKey?: string;
  /**
   * The failover agents of this worker process (its pool), this one included once constructed. Each
   * keeps its own replica, and after a failover the results of gossip mode sit mostly in the acting
   * coordinator's: a restarted hub leasing one of those tasks to another agent of the process before
   * the coordinator's handback reaches it would have it run again, so a TASK_REQ is answered from any.
   */
  siblings?: Set<AgentFailover>;
  /** Answer a restarted hub's per-id comparison (SYNC_IDS) and say so in HANDSHAKE; false acts as a holder that predates it, `'ids'` one that predates sub-bucket values (tests). */
  syncIds?: boolean | 'ids';
}

/**
 * One agent's failover machinery: a peer port, a GossipNode and the FailoverController,
 * plus the agent-facing glue: hub frames in, HANDBACK requests out over the current hub connection.
 */
export class AgentFailover {
  readonly transport: TcpTransport;
  readonly node: GossipNode;
  readonly controller: FailoverController;
  /** Topology runs the hub replicated: driven on by this member while it is the acting coordinator. */
  readonly runs: GossipRuns;
  /** Each peer's caps and role (PEERS), so the acting coordinator routes tasks as the hub does. */
  private readonly peerInfo = new Map<string, { caps: string[]; role?: string; slots?: number }>();
  private conn?: Connection;
  private readonly cfg: WorkerConfig;
  private readonly siblings: Set<AgentFailover>;
  private started = false;
  /** Stops the handback retry check. */
  private retry?: () => void;
  /** Tasks running here under a hub lease (the agent reports those itself). */
  private readonly hubTasks = new Set<string>();
  /** This agent's copy of the hub's state: holder or keeper, STATE frames, its sync mark, shedding (worker/hub-copy.ts). */
  readonly copy: HubCopy;
  /** HANDBACK frames sent, by envelope id: resolved by the ACK that names them (`re`). */
  private readonly waiting = new Map<string, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

  constructor(selfId: string, token: string | undefined, slots: number, execute: Execute, private readonly opts: AgentFailoverOptions, private readonly log: Logger) {
    const cfg = opts.config ?? WORKER_DEFAULTS;
    this.cfg = cfg;
    this.transport = new TcpTransport({ ...cfg.transport, host: opts.host, port: opts.port, advertise: opts.advertise, advertiseHost: opts.advertiseHost, token, tls: opts.tls, log });
    const catchUpMs = cfg.coordinator.catchUpMs;
    this.node = new GossipNode({ id: selfId, transport: this.transport, execute, slots, log, membership: opts.membership, hubMonitor: opts.hubMonitor ?? cfg.hubMonitor,
      coordinator: {
        ...cfg.coordinator,
        offersOf: (id) => this.peerInfo.get(id),
        // Each member's own slot count (the hub's PEERS), not one each: a 4-slot member fills 4 after a failover.
        slotsOf: (id) => (id === selfId ? slots : this.peerInfo.get(id)?.slots),
        // Runs start after the catch-up wait too, so the runner sees the freshest results first.
        onRole: (on) => {
          if (!on) { this.runs.setCoordinating(false); return; }
          setTimeout(() => { if (this.node.coordinator.isCoordinating) this.runs.setCoordinating(true); }, catchUpMs).unref();
        },
      },
      // Star mode: the hub replicates to a few holders (hub/replicate.ts); no gossip of every change.
      // Gossip mode: non-holders start with little, so anti-entropy runs every second (a round between
      // replicas that agree costs 256 bucket fingerprints).
      // A member takes in the whole state in gossip mode only if the hub elected it a holder (or it coordinates).
      sync: { quiet: true, syncIntervalMs: 1000, holder: false } });
    this.controller = new FailoverController(this.node, { handBack: (entries) => this.handBack(entries), offer: (ids) => this.offer(ids), digest: (d) => this.digest(d) }, {
      log, handbackChunk: cfg.handback.chunk, handbackBytes: cfg.handback.bytes, offerChunk: cfg.handback.offerChunk,
      // Each result is handed back by the member that produced it, each final failure by the member
      // that decided it, or by every survivor if that member is gone: 1 offer per task instead of 1 per
      // task and member. One whose member dies before its handback is still safe: the hub re-dispatches
      // the task, and a worker with it answers from its replica.
      select: () => {
        const live = new Set(this.node.membership.live());
        return (e) => { const o = e.result ?? e.failure; return !o || o.worker === selfId || !live.has(o.worker); };
      },
      skipWorkers: () => this.node.membership.live().filter((id) => id !== selfId),
    });
    // A task from gossip mode that finishes here after the hub is back: report it like any result.
    // Only this member's own gossip-mode executions: a replica merge (the hub's STATE, a peer's delta)
    // can repeat a result the hub already has, and reporting that would be a duplicate TASK_RES.
    this.node.executor.onRecorded((id, e) => {
      const r = e.result;
      if (r?.worker === selfId && typeof r.text === 'string' && !this.hubTasks.has(id) && this.mode === Mode.STAR && this.conn && !this.conn.isClosed) {
        this.conn.send(Type.TASK_RES, { task_id: id, text: r.text, done: true, seq: 0 });
      }
    });
    this.node.onMode((m) => log.info({ mode: m, coordinator: this.node.status().coordinator }, 'failover mode'));
    if (opts.resultKey) this.node.replica.signer = { id: selfId, key: opts.resultKey };
    this.runs = new GossipRuns(this.node.replica, log.child({ part: 'runs' }));
    this.copy = new HubCopy(this.node, this.controller, this.runs, { busy: () => this.busyHere(), conn: () => this.conn, syncIds: opts.syncIds, log });
    this.siblings = opts.siblings ?? new Set();
    this.siblings.add(this);
  }

  /** Open the peer port; resolves with the address to announce in HANDSHAKE. */
  listen(): Promise<string> { return this.transport.listen(); }

  get mode(): Mode { return this.node.mode; }
  /** The hub elected this member a keeper of the open tasks (hub/replicate-keepers.ts). */
  get keepsOpenTasks(): boolean { return this.copy.keepsOpenTasks; }
  /** When a task last became final in this replica (epoch ms): the end of a run, for benches. */
  get lastFinalAt(): number | undefined { return this.copy.lastFinalAt; }
  status(): NodeStatus { return this.node.status(); }

  /** The client connected to a hub: start gossip on the first connect, reconcile after gossip mode. */
  connected(conn: Connection): void {
    this.conn = conn;
    if (!this.started) {
      this.started = true;
      this.node.start();
      // A handback that failed while the link stayed up (a timeout) is tried again.
      // On the process's clock: the agents of one process check in one wake-up.
      this.retry = every(2000, () => { if (this.mode === Mode.RECONCILING && this.conn && !this.conn.isClosed) void this.controller.hubConnected(); });
    }
    void this.controller.hubConnected();
  }

  disconnected(): void {
    this.conn = undefined;
    for (const [id, w] of this.waiting) { clearTimeout(w.timer); w.reject(new Error('hub connection lost')); this.waiting.delete(id); }
  }

  /** The client's link to the hub's port before its HANDSHAKE_ACK (worker/gossip/hub-monitor.ts `link`). */
  link(s: HubLinkState): void { if (this.started) this.node.hub.link(s); }

  /** Every frame from the hub (heartbeats too, which the agent does not see). */
  heard(m?: AnyMessage): void {
    if (!this.started) return;
    if (m?.type === Type.HEARTBEAT && m.payload.mode !== undefined) this.copy.heartbeat(m.payload);
    this.controller.heard();
    // A hub that was only stopped past the suspicion time speaks again on the same link: reconcile.
    if (this.mode === Mode.GOSSIP && this.conn && !this.conn.isClosed) void this.controller.hubConnected();
  }

  /** Failover messages from the hub; returns true if handled. */
  onMessage(m: AnyMessage): boolean {
    if (m.type === Type.PEERS) {
      for (const p of m.payload.peers) this.peerInfo.set(p.id, { caps: p.caps ?? [], role: p.role || undefined, slots: p.slots });
      // The hub's --max-attempts and lease length hold for the acting coordinator too.
      const r = m.payload.rules;
      if (r) this.node.coordinator.setRules({ defaultMaxAttempts: r.max_attempts, leaseMs: r.lease_ms });
      this.controller.peers(m.payload.peers);
      return true;
    }
    if (m.type === Type.STATE) { this.copy.state(m.payload); return true; }
    if (m.type === Type.SYNC_IDS) { this.copy.syncIds(m); return true; }
    if (m.type === Type.ACK && m.re && this.waiting.has(m.re)) {
      const w = this.waiting.get(m.re)!;
      this.waiting.delete(m.re);
      clearTimeout(w.timer);
      w.resolve(m.payload as Record<string, unknown>);
      return true;
    }
    if (m.type === Type.ERROR && m.re && this.waiting.has(m.re)) {
      const w = this.waiting.get(m.re)!;
      this.waiting.delete(m.re);
      clearTimeout(w.timer);
      // Entries the hub refused (no valid MAC, a live lease elsewhere) are its to run again; the rest were merged.
      if (m.payload.code === 'SWARM_ERR_HANDBACK_REFUSED') { this.log.warn({ msg: m.payload.msg }, 'hub refused handback entries'); w.resolve({}); return true; }
      w.reject(new Error(`${m.payload.code}: ${m.payload.msg}`));
      return true;
    }
    return false;
  }

  /** Tasks a cut-back copy keeps whatever else goes: run here under a hub lease, or running here now. */
  private busyHere(): (id: string) => boolean {
    const running = new Set(this.node.executor.active);
    return (id) => this.hubTasks.has(id) || running.has(id);
  }

  /** How far this agent's copy of the hub's state goes, for the next HANDSHAKE (worker/hub-copy.ts). */
  takeSyncMark(): Payload<'HANDSHAKE'>['sync'] { return this.copy.takeSyncMark(); }

  /** A final result for a task in this agent's replica or a sibling's, if gossip mode (or a peer) already finished it. */
  finished(id: string): { text: string; attempt: number; receipt?: Receipt } | undefined {
    let r = this.node.replica.get(id)?.result;
    for (const o of this.siblings) { if (r && typeof r.text === 'string') break; if (o !== this) r = o.node.replica.get(id)?.result; }
    return r && typeof r.text === 'string' ? { text: r.text, attempt: r.attempt, receipt: r.receipt } : undefined;
  }

  /**
   * A final failure for a task in this agent's replica or a sibling's, decided in gossip mode (and no
   * result anywhere): a restarted hub that leases it before the handback reaches it is told so, and
   * the task does not run again.
   */
  failedHere(id: string): { code: string; msg: string } | undefined {
    for (const o of this.siblings) {
      const e = o.node.replica.get(id);
      if (e?.result) return undefined;
      if (e?.failure?.error) return e.failure.error;
    }
    return undefined;
  }

  /** A task the hub leased to us is running / has ended (the executor must not start it twice). */
  adopt(id: string): void { this.hubTasks.add(id); this.node.executor.adopt(id); }
  release(id: string): void { this.hubTasks.delete(id); this.node.executor.release(id); }

  /** A result produced under a hub lease: into the replica first, so a hub death cannot lose it. */
  localResult(id: string, attempt: number, text: string, receipt?: Receipt): void {
    this.controller.localResult(id, attempt, text, receipt);
  }

  stop(): void {
    this.siblings.delete(this);
    this.disconnected();
    this.retry?.();
    this.runs.stopAll();
    this.node.stop();
    void this.transport.close();
  }

  /** One HANDBACK frame over the current hub connection (the controller sizes it); the hub's counts. */
  private async handBack(entries: Entry[]): Promise<{ recorded: number; duplicate: number }> {
    const r = await this.request({ entries });
    return { recorded: Number(r.recorded) || 0, duplicate: Number(r.duplicate) || 0 };
  }

  /**
   * Ids-first: offer task ids; the hub's ACK names those it wants. An ACK without `want` comes from a
   * hub that predates offers (it took the frame as an empty handback): undefined, hand back everything.
   */
  private async offer(ids: string[]): Promise<string[] | undefined> {
    const r = await this.request({ entries: [], offer: ids });
    return Array.isArray(r.want) ? r.want.filter((x): x is string => typeof x === 'string') : undefined;
  }

  /** Digest-first: one digest frame; the hub's ACK names the buckets that differ (none without `differ`: a hub that predates digests). */
  private async digest(d: HandbackDigest): Promise<number[] | undefined> {
    const r = await this.request({ entries: [], digest: d });
    return Array.isArray(r.differ) ? r.differ.filter((x): x is number => Number.isInteger(x)) : undefined;
  }

  private request(payload: Payload<'HANDBACK'>): Promise<Record<string, unknown>> {
    const conn = this.conn;
    if (!conn || conn.isClosed) return Promise.reject(new Error('not connected to a hub'));
    return new Promise((resolve, reject) => {
      const id = conn.send(Type.HANDBACK, payload);
      const timer = setTimeout(() => { this.waiting.delete(id); reject(new Error('handback not acknowledged')); }, this.cfg.handback.timeoutMs);
      timer.unref();
      this.waiting.set(id, { resolve, reject, timer });
    });
  }
}
