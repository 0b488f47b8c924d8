import net from 'node:net';
import tls from 'node:tls';
import fs from 'node:fs';
import type { Logger } from 'pino';
import { Type, randomId } from '../protocol/index.js';
import { Registry } from './registry.js';
import { TaskStore } from './store.js';
import type { TaskInput, TaskRecord } from './task.js';
import type { HubConfig } from './config.js';
import { HubMetrics } from './metrics.js';
import { HubReplicator } from './replicate.js';
import { RoleAssigner, checkRolePlan, type RolePlan } from './roles.js';
import { checkTasksFit } from './bounds.js';
import type { HubContext, HubEvents } from './context.js';
import { Dispatcher } from './dispatcher.js';
import { Results } from './results.js';
import { Sessions } from './sessions.js';
import { Liveness } from './liveness.js';
import { handshakeCause, rememberRemotes, remoteOf } from './tls-refusal.js';
import { RefusalLog } from './refusal-log.js';
import { conflictingFields } from './spec-conflict.js';
import { fitConnCaps, openFilesLimit, type ConnCaps } from './conn-caps.js';

export type { HubEvents } from './context.js';

/**
 * The hub, as a composition root: it accepts worker connections and authenticates them (Sessions),
 * leases tasks within their slots (Dispatcher, by sched's rules over the store), records results
 * exactly once (Results, through the store) and declares silent workers dead (Liveness).
 */
export class Hub implements HubContext {
  readonly registry = new Registry();
  readonly metrics = new HubMetrics();
  store!: TaskStore;
  private server?: net.Server;
  private stopping = false;
  private readonly dispatcher: Dispatcher;
  private readonly sessions: Sessions;
  private readonly liveness: Liveness;
  readonly startedAt = Date.now();
  readonly name = `hub-${randomId().slice(0, 6)}`;
  /** Failover: replicates state to workers that offer a peer port, merges their handbacks. */
  readonly failover: HubReplicator;
  /** ASSIGN_ROLE: the role plan and one-off assignments. */
  readonly roles: RoleAssigner;
  /** Dashboards open now: while there are none, TASK_REQs ask workers for no partial answers. */
  watchers = 0;
  /** Refused links (no token needed to cause them): logged a bounded number of lines per window. */
  readonly refusals: RefusalLog;
  /** Connection caps of the worker port and the control API, fitted under this process's fd limit at construction. */
  readonly connCaps: ConnCaps;

  constructor(readonly config: HubConfig, readonly log: Logger, readonly events: HubEvents = {}) {
    this.refusals = new RefusalLog(log);
    this.connCaps = fitConnCaps({ workers: config.maxWorkerLinks, control: config.maxControlConnections }, openFilesLimit());
    this.dispatcher = new Dispatcher(this);
    // The store opens in start() and the replicator is made below: the narrow views read them when used.
    const hub = this;
    const results = new Results({ log, registry: this.registry, metrics: this.metrics, dispatcher: this.dispatcher, get store() { return hub.store; } });
    this.sessions = new Sessions(this, this.dispatcher, results);
    this.liveness = new Liveness({
      config, registry: this.registry, sessions: this.sessions, dispatcher: this.dispatcher,
      get store() { return hub.store; }, get failover() { return hub.failover; },
    });
    this.roles = new RoleAssigner(this.registry, () => this.scheduleDispatch(), log.child({ part: 'roles' }));
    if (config.roles) this.roles.setPlan(checkRolePlan(config.roles));
    // A handback's tasks ran already (results a worker holds): taken whatever the hot state holds.
    this.failover = new HubReplicator(() => this.store, (specs) => this.submit(specs, { handback: true }), log.child({ part: 'failover' }), {
      token: config.token, live: (id) => this.registry.get(id) !== undefined,
      rules: { max_attempts: config.maxAttempts, lease_ms: config.leaseMs },
      // A frame is a small part of what a link may hold: a chunk waiting for `drain` never nears the bound.
      chunkBytes: Math.min(256 * 1024, Math.floor(config.maxOutbound / 8)), maxBacklog: Math.floor(config.maxOutbound / 4),
    });
  }

  /**
   * Listen, then open the journal. The port is bound before the replay (seconds at a large age, on a
   * loaded host): a worker whose hub was killed connects as soon as the new one binds, and its
   * HANDSHAKE waits in the socket instead of in a reconnect backoff that grew while the port was
   * closed. Links are held unread until the replay has ended: nothing joins, and nothing is leased,
   * before the store is whole. Resolves with the bound address.
   */
  async start(): Promise<{ host: string; port: number }> {
    const t0 = performance.now();
    const held: net.Socket[] = [];
    let accept: ((s: net.Socket) => void) | undefined;
    // A link that resets while held has no reader yet: its error is not the process's.
    const ignore = (): void => {};
    const onSocket = (s: net.Socket) => {
      if (accept) { accept(s); return; }
      s.on('error', ignore);
      held.push(s);
    };
    this.server = this.config.tlsCert && this.config.tlsKey
      ? tls.createServer({ cert: fs.readFileSync(this.config.tlsCert), key: fs.readFileSync(this.config.tlsKey),
        // With a CA, a worker must present a certificate it signed. The handshake lets others through
        // (rejectUnauthorized off) only so that Sessions can refuse them with an ERROR frame saying why:
        // a bare close (TLS 1.3 checks the client's certificate after the client is done) looks like a
        // hub restarting, which a worker retries forever.
        ...(this.config.tlsCa ? { ca: fs.readFileSync(this.config.tlsCa), requestCert: true, rejectUnauthorized: false } : {}) }, onSocket)
      : net.createServer(onSocket);
    // Past the cap a link is closed at accept ('drop'): the fds it would hold stay free for the journal,
    // the archive, the logs and the control API (hub/conn-caps.ts).
    this.server.maxConnections = this.connCaps.workers;
    this.server.on('drop', (d?: { remoteAddress?: string; remotePort?: number }) => this.connectionRefused('worker', d));
    // A worker that does not trust our certificate (or presents none we trust) fails in the handshake: log it here too.
    rememberRemotes(this.server);
    this.server.on('tlsClientError', (err: NodeJS.ErrnoException, s: net.Socket) => this.refusals.warn({ remote: remoteOf(s), code: err.code, err: handshakeCause(err) }, 'worker link refused in the TLS handshake'));
    await listen(this.server, this.config.port, this.config.host);
    const caps = this.connCaps;
    if (caps.lowered) this.log.warn({ fd_limit: caps.fdLimit, reserve: caps.reserve, configured: caps.lowered, worker_links: caps.workers, control_connections: caps.control },
      `connection caps lowered to fit ${caps.fdLimit} open files (ulimit -n) less ${caps.reserve} kept for the journal, archive, logs and pipes: worker port ${caps.workers} (configured ${caps.lowered.workers}), control API ${caps.control} (configured ${caps.lowered.control})`);
    const tBound = performance.now();
    try {
      this.store = await TaskStore.open(this.config.stateDir, {
        maxDepth: this.config.maxQueue, leaseMs: this.config.leaseMs, defaultMaxAttempts: this.config.maxAttempts,
      }, { fsync: this.config.fsync, fsyncMs: this.config.fsyncMs, compactBytes: this.config.compactBytes },
      { retain: { ageMs: this.config.retainMs, count: this.config.retainCount, bytes: this.config.retainBytes }, archiveMax: { bytes: this.config.archiveMaxBytes, ageMs: this.config.archiveMaxAgeMs } });
    } catch (err) {
      for (const s of held) s.destroy();
      await new Promise<void>((resolve) => this.server!.close(() => resolve()));
      throw err;
    }
    // Where a restart's time went: node and the modules (boot), the bind, the replay; and the CPU it took (a k3s startupProbe's budget).
    this.log.info({ boot_ms: Math.round(t0), bind_ms: Math.round(tBound - t0), replay_ms: Math.round(performance.now() - tBound), cpu_ms: Math.round(cpuMs()), hot: this.store.queue.counts() }, 'journal replayed');
    const damage = this.store.damage;
    if (damage.records || damage.orphans) this.log.warn({ damaged: damage.records, orphans: damage.orphans, quarantine: damage.quarantine, samples: damage.samples }, 'journal: damaged records set aside; every intact record was kept');
    const torn = this.store.retention.archive?.torn_tail;
    if (torn) this.log.warn(torn, 'results archive: its torn last line (a write cut short by a crash) was cut off; that write\'s tasks had no evict record yet, so they stayed hot and are archived again');
    for (const d of this.store.retention.archive?.damaged ?? []) this.log.warn(d, `results archive: ${d.file} is damaged: ${d.why}`);
    // The store's events are the spine: counters, replication and dispatch follow them; nobody reports by hand.
    for (const part of [this.metrics, this.failover, this.dispatcher]) this.store.subscribe(part.onStoreEvent);
    this.liveness.start();
    this.failover.start();
    accept = (s) => this.sessions.accept(s);
    for (const s of held.splice(0)) {
      s.off('error', ignore);
      if (s.destroyed) continue;
      accept(s);
    }
    this.scheduleDispatch();
    const addr = this.server.address() as net.AddressInfo;
    this.log.info({ host: addr.address, port: addr.port, tls: Boolean(this.config.tlsCert) }, 'hub listening');
    return { host: addr.address, port: addr.port };
  }

  /** A connection closed at accept because its port's cap was reached: counted, logged rate-limited. */
  connectionRefused(port: 'worker' | 'control', d?: { remoteAddress?: string; remotePort?: number }): void {
    this.metrics.connectionsRefused[port]++;
    const cap = port === 'worker' ? this.connCaps.workers : this.connCaps.control;
    this.refusals.warn({ port, cap, remote: d?.remoteAddress !== undefined ? `${d.remoteAddress}:${d.remotePort}` : undefined },
      `${port === 'worker' ? 'worker port' : 'control API'}: connection refused, ${cap} open already (its cap)`);
  }

  get address(): { host: string; port: number } | undefined {
    const a = this.server?.address();
    return a && typeof a === 'object' ? { host: a.address, port: a.port } : undefined;
  }

  /** Submit tasks; resolves once they are journaled. `handback`: a worker's, never refused for the hot state (TaskStore.submitMany). */
  async submit(input: readonly (TaskInput | unknown)[], o: { handback?: boolean } = {}) {
    // A task without max_tokens gets the hub's default: with none, a one-line prompt ran ~2,000 tokens.
    const specs = input.map((s) => (s && typeof s === 'object' && !Array.isArray(s) && (s as TaskInput).max_tokens === undefined ? { ...s, max_tokens: this.config.defaultMaxTokens } : s));
    checkTasksFit(specs, this.config.maxLine);
    const out: { record: TaskRecord; duplicate: boolean; conflict?: string[] }[] = await this.store.submitMany(specs, { whenBehind: o.handback ? 'accept' : 'refuse' });
    // The store's `accepted` events queued the new tasks for the holders and woke the dispatcher.
    // The workers start before the holders' copy is encoded; both go before the submitter's answer.
    if (out.some((r) => !r.duplicate)) this.dispatcher.dispatchNow();
    this.failover.flush();
    // A duplicate whose fields differ from its id's task is told so (specs were filled in place by the store's check).
    if (!o.handback) out.forEach((r, i) => { if (r.duplicate) { const c = conflictingFields(specs[i], r.record); if (c) r.conflict = c; } });
    return out;
  }

  /**
   * Cancel tasks that have not finished: each fails with SWARM_ERR_CANCELLED (journaled, so a
   * restart does not run it again), and the worker holding one is told to stop it (an ERROR with
   * its task_id). The worker's slot stays counted until it answers. Returns the ids cancelled and
   * how many were running on a worker.
   */
  async cancel(ids: readonly string[], reason: string): Promise<{ cancelled: string[]; running: number }> {
    const cancelled: string[] = [];
    let running = 0;
    for (const id of ids) {
      const rec = this.store.queue.get(id);
      if (!rec || rec.state === 'done' || rec.state === 'failed') continue;
      if (!(await this.store.cancel(id, reason))) continue;
      this.dispatcher.forgetTask(id);
      // The holder is looked up after the journal write: while it waited, a worker freed by an
      // earlier cancel may have been given this (then still queued) task.
      for (const w of this.registry.all()) {
        if (w.inflight.has(id)) { w.conn.sendError('SWARM_ERR_CANCELLED', reason.slice(0, 4000), { task_id: id }); running++; }
      }
      cancelled.push(id);
    }
    this.failover.flush();
    return { cancelled, running };
  }

  /** Replace the role plan (`{ thinker: 2, worker: 3 }`); roles go out as ASSIGN_ROLE. */
  setRolePlan(plan: RolePlan): void { this.roles.setPlan(plan); }

  /** Send one worker ASSIGN_ROLE; it counts for dispatch once the worker ACKs. False: no such worker. */
  assignRole(id: string, role: string, specRef?: string): boolean {
    const w = this.registry.get(id);
    if (!w) return false;
    this.roles.assign(w, role, specRef);
    return true;
  }

  /** Ask a worker to stop cleanly. */
  kill(id: string, reason: string): boolean {
    const w = this.registry.get(id);
    if (!w) return false;
    w.conn.send(Type.KILL, { reason });
    return true;
  }

  /** A live worker's id is not taken over by a HANDSHAKE without its session within this long (Sessions). */
  get duplicateQuietMs(): number { return this.sessions.duplicateQuietMs; }

  get isStopping(): boolean { return this.stopping; }

  /** Run a dispatch pass soon (coalesced). */
  scheduleDispatch(): void { this.dispatcher.schedule(); }

  /**
   * Stop accepting, KILL the workers asked for (all, or those `killWorkers` picks), flush the
   * journal, close. Workers not KILLed only lose their link: they reconnect to the next hub.
   */
  async stop(opts: { killWorkers?: boolean | ((id: string) => boolean); graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.liveness.stop();
    this.failover.stop();
    this.dispatcher.stop();
    const pick = opts.killWorkers;
    const killed = [...this.registry.all()].filter((w) => (typeof pick === 'function' ? pick(w.id) : pick === true));
    for (const w of killed) w.conn.send(Type.KILL, { reason: 'shutdown' });
    const deadline = Date.now() + (opts.graceMs ?? 3000);
    while (killed.some((w) => this.registry.get(w.id) === w) && Date.now() < deadline) await sleep(25);
    for (const w of this.registry.all()) w.conn.destroy('hub stopping');
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    await this.store?.close();
  }
}

function listen(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => { server.off('error', reject); resolve(); });
  });
}

/** This process's CPU time so far, in ms. */
function cpuMs(): number { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }

function sleep(ms: number): Promise<void> { return new Promise((r) => setTimeout(r, ms)); }
