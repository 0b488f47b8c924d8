import net from 'node:net';
import tls from 'node:tls';
import fs from 'node:fs';
import type { Logger } from 'pino';
import { Connection, Type, safeEqual, randomId, workerCredential, type AnyMessage, type Message, type ErrorCode } from '../protocol/index.js';
import { isRetryable, pickByPrefix } from '../sched/index.js';
import { Registry, type WorkerEntry } from './registry.js';
import { TaskStore } from './store.js';
import type { TaskInput, TaskRecord } from './task.js';
import type { HubConfig } from './config.js';
import { HubMetrics } from './metrics.js';
import { Watchdog } from './watchdog.js';
import { HubReplicator } from './replicate.js';
import { Answer } from './answer.js';
import { RoleAssigner, checkRolePlan, type RolePlan } from './roles.js';
import { checkTasksFit } from './bounds.js';

/** A worker whose engine failed to start gets no task for this long. */
const ENGINE_COOLDOWN_MS = 5000;
/** Bound on one task's streamed answer held by the hub. */
const MAX_ANSWER = 16 * 1024 * 1024;

export interface HubEvents {
  workerUp?(w: WorkerEntry): void;
  workerDown?(id: string, reason: string): void;
}

/**
 * The hub: accepts worker connections, authenticates them, leases tasks to them within their slots,
 * records results exactly once, and declares silent workers dead.
 */
export class Hub {
  readonly registry = new Registry();
  readonly metrics = new HubMetrics();
  store!: TaskStore;
  private server?: net.Server;
  private readonly free = new Set<WorkerEntry>();
  /** When each newly accepted task became ready to run (performance.now), for dispatch latency. */
  private readonly readyAt = new Map<string, number>();
  private dispatchScheduled = false;
  /** Each worker's last prompt (its start), for cache-aware dispatch (sched/affinity.ts). */
  private readonly lastPrompt = new Map<string, string>();
  private readyTimer?: NodeJS.Timeout;
  private readonly watchdog: Watchdog;
  private stopping = false;
  readonly startedAt = Date.now();
  readonly name = `hub-${randomId().slice(0, 6)}`;
  /** Failover: replicates state to workers that offer a peer port, merges their handbacks. */
  readonly failover: HubReplicator;
  /** ASSIGN_ROLE: the role plan and one-off assignments. */
  readonly roles: RoleAssigner;

  constructor(readonly config: HubConfig, readonly log: Logger, private readonly events: HubEvents = {}) {
    this.watchdog = new Watchdog({
      intervalMs: Math.max(100, Math.floor(config.heartbeatMs / 2)),
      onTick: (now) => this.tick(now),
    });
    this.roles = new RoleAssigner(this.registry, () => this.scheduleDispatch(), log.child({ part: 'roles' }));
    if (config.roles) this.roles.setPlan(checkRolePlan(config.roles));
    this.failover = new HubReplicator(() => this.store, (specs) => this.submit(specs), log.child({ part: 'failover' }));
  }

  /** Open the journal and listen. Resolves with the bound address. */
  async start(): Promise<{ host: string; port: number }> {
    this.store = await TaskStore.open(this.config.stateDir, {
      maxDepth: this.config.maxQueue, leaseMs: this.config.leaseMs, defaultMaxAttempts: this.config.maxAttempts,
    }, { fsync: this.config.fsync, fsyncMs: this.config.fsyncMs, compactBytes: this.config.compactBytes });
    const damage = this.store.damage;
    if (damage.records) this.log.warn({ damaged: damage.records, quarantine: damage.quarantine, samples: damage.samples }, 'journal: damaged records set aside; every intact record was kept');
    this.store.onChange((rec) => { this.metrics.taskFinished(rec); this.failover.changed(rec); });
    const onSocket = (s: net.Socket) => this.accept(s);
    this.server = this.config.tlsCert && this.config.tlsKey
      ? tls.createServer({ cert: fs.readFileSync(this.config.tlsCert), key: fs.readFileSync(this.config.tlsKey),
        // With a CA, a worker without a certificate it signed is refused in the TLS handshake.
        ...(this.config.tlsCa ? { ca: fs.readFileSync(this.config.tlsCa), requestCert: true, rejectUnauthorized: true } : {}) }, onSocket)
      : net.createServer(onSocket);
    this.server.maxConnections = 20_000;
    // A worker that does not trust our certificate (or presents none we trust) fails in the handshake: log it here too.
    this.server.on('tlsClientError', (err: Error, s: net.Socket) => this.log.warn({ remote: s.remoteAddress, err: err.message }, 'worker link refused in the TLS handshake'));
    try {
      await listen(this.server, this.config.port, this.config.host);
    } catch (err) {
      await this.store.close();
      throw err;
    }
    this.watchdog.start();
    this.failover.start();
    this.scheduleDispatch();
    const addr = this.server.address() as net.AddressInfo;
    this.log.info({ host: addr.address, port: addr.port, tls: Boolean(this.config.tlsCert) }, 'hub listening');
    return { host: addr.address, port: addr.port };
  }

  get address(): { host: string; port: number } | undefined {
    const a = this.server?.address();
    return a && typeof a === 'object' ? { host: a.address, port: a.port } : undefined;
  }

  /** Submit tasks; resolves once they are journaled. */
  async submit(input: readonly (TaskInput | unknown)[]) {
    // A task without max_tokens gets the hub's default: with none, a one-line prompt ran ~2,000 tokens.
    const specs = input.map((s) => (s && typeof s === 'object' && !Array.isArray(s) && (s as TaskInput).max_tokens === undefined ? { ...s, max_tokens: this.config.defaultMaxTokens } : s));
    checkTasksFit(specs, this.config.maxLine);
    const out = await this.store.submitMany(specs);
    const now = performance.now();
    for (const r of out) if (!r.duplicate) { this.metrics.submitted++; this.readyAt.set(r.record.id, now); this.failover.changed(r.record, true); }
    this.failover.flush();
    this.scheduleDispatch();
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
      const holder = rec.state === 'leased' ? this.registry.get(rec.worker ?? '') : undefined;
      if (!(await this.store.cancel(id, reason))) continue;
      this.readyAt.delete(id);
      if (holder?.inflight.has(id)) { holder.conn.sendError('SWARM_ERR_CANCELLED', reason.slice(0, 4000), { task_id: id }); running++; }
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

  /**
   * A connected worker heard from within this long is live: a HANDSHAKE with its id and without its
   * session is refused (SWARM_ERR_DUPLICATE_WORKER). Half the dead-after time: a half-open link is
   * given up sooner than the watchdog would, and still after more than two missed heartbeats.
   */
  get duplicateQuietMs(): number { return Math.floor(this.config.deadAfterMs / 2); }

  /** Stop accepting, KILL every worker (when asked), flush the journal, close. */
  async stop(opts: { killWorkers?: boolean; graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.watchdog.stop();
    this.failover.stop();
    if (this.readyTimer) clearTimeout(this.readyTimer);
    if (opts.killWorkers) for (const w of this.registry.all()) w.conn.send(Type.KILL, { reason: 'shutdown' });
    const deadline = Date.now() + (opts.graceMs ?? 3000);
    while (opts.killWorkers && this.registry.size > 0 && Date.now() < deadline) await sleep(25);
    for (const w of this.registry.all()) w.conn.destroy('hub stopping');
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    await this.store?.close();
  }

  private accept(socket: net.Socket): void {
    const conn = new Connection(socket, { name: this.name, maxLine: this.config.maxLine });
    const timer = setTimeout(() => conn.sendError('SWARM_ERR_HANDSHAKE_TIMEOUT', `no HANDSHAKE within ${this.config.handshakeTimeoutMs} ms`), this.config.handshakeTimeoutMs);
    timer.unref();
    let worker: WorkerEntry | undefined;
    conn.onStatus((s) => {
      if (s.type === 'error' && !s.fromPeer) {
        this.metrics.protocolErrors.set(s.code, (this.metrics.protocolErrors.get(s.code) ?? 0) + 1);
        if (worker && s.frame !== undefined) this.onBadFrame(worker, s.frame, s.msg);
      }
      if (s.type === 'close') {
        clearTimeout(timer);
        if (worker && this.registry.get(worker.id) === worker) this.drop(worker, s.reason);
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
        if (worker && msg.payload.peer_addr) this.failover.join(worker, msg.payload.peer_addr);
        // ASSIGN_ROLE, like failover frames, must go out in the negotiated codec.
        if (worker) this.roles.joined(worker);
        return;
      }
      this.onWorkerMessage(worker, msg);
    });
  }

  private handshake(conn: Connection, msg: Message<'HANDSHAKE'>): WorkerEntry | undefined {
    const p = msg.payload;
    const named = p.worker_id || msg.src;
    // The swarm token admits any id; a worker credential (protocol/auth.ts) only the id it was derived for.
    const token = this.config.token;
    if (token && !safeEqual(p.token, token) && !(named && safeEqual(p.token, workerCredential(token, named)))) {
      this.log.warn({ remote: conn.socket.remoteAddress, worker: named }, 'handshake refused: bad token');
      conn.sendError('SWARM_ERR_AUTH', p.token?.startsWith('wc1.') ? `credential is not the one of worker ${named ?? '(no worker_id)'}` : 'wrong or missing token', { re: msg.id });
      return undefined;
    }
    if (this.stopping) { conn.sendError('SWARM_ERR_SHUTDOWN', 'hub is stopping', { re: msg.id }); conn.close(); return undefined; }
    const id = named || `w-${randomId()}`;
    const now = Date.now();
    const old = this.registry.get(id);
    if (old) {
      // Same id as a connected worker (PROTOCOL.md 4.1): a reconnect that proves it is that worker
      // (its session), or whose old link has gone quiet (half-open after a cut), replaces it;
      // anything else is a live duplicate, or someone taking over an id, and is refused.
      const quietMs = now - old.lastSeen;
      const resumed = p.session !== undefined && safeEqual(p.session, old.session);
      if (!resumed && !old.conn.isClosed && quietMs <= this.duplicateQuietMs) {
        this.log.warn({ worker: id, remote: conn.socket.remoteAddress, quietMs }, 'handshake refused: worker id in use');
        conn.sendError('SWARM_ERR_DUPLICATE_WORKER', `worker ${id} is connected and was heard ${quietMs} ms ago`, { re: msg.id });
        return undefined;
      }
      // Not "down": the id is back at once, so the supervisor must not kill the process that just reconnected.
      this.drop(old, resumed ? 'replaced by its reconnect' : `replaced by a new connection (old link quiet for ${quietMs} ms)`, false);
    }
    const w: WorkerEntry = {
      id, role: p.role ?? '', status: 'idle', state: 'IDLE', lastSeen: now, connectedAt: now, driver: p.driver,
      caps: p.caps, slots: p.slots, inflight: new Map(), conn, pid: p.pid, load: 0, freedAt: performance.now(), done: 0,
      session: randomId() + randomId(),
    };
    conn.peer = id;
    this.registry.add(w);
    const codec = this.codecFor(p.codecs);
    conn.send(Type.HANDSHAKE_ACK, {
      status: 'ok', worker_id: id, codec, session: w.session,
      config: { heartbeat_ms: this.config.heartbeatMs, dead_after_ms: this.config.deadAfterMs },
    }, { re: msg.id });
    conn.socket.on('drain', () => { this.free.add(w); this.scheduleDispatch(); });
    this.free.add(w);
    this.log.info({ worker: id, driver: p.driver, slots: p.slots, role: w.role, codec }, 'worker joined');
    this.events.workerUp?.(w);
    this.scheduleDispatch();
    return w;
  }

  private codecFor(offered: string[]): 'msgpack' | 'ndjson' {
    return this.config.msgpack && offered.includes('msgpack') ? 'msgpack' : 'ndjson';
  }

  private onWorkerMessage(w: WorkerEntry, msg: AnyMessage): void {
    w.lastSeen = Date.now();
    switch (msg.type) {
      case Type.HEARTBEAT:
        w.load = msg.payload.load;
        w.state = msg.payload.state ?? w.state;
        this.failover.heartbeat(w, msg.payload);
        return;
      case Type.HANDBACK:
        // Only a worker that joined as a failover peer held a replica to hand back.
        if (!this.failover.isPeer(w)) { w.conn.sendError('SWARM_ERR_UNEXPECTED', 'HANDBACK from a worker that did not join as a failover peer (no peer_addr)', { re: msg.id }); return; }
        void this.failover.handBack(w, msg);
        return;
      case Type.TASK_RES:
        this.onResult(w, msg);
        return;
      case Type.ERROR: {
        // The task is named by task_id, or else by `re` naming its TASK_REQ.
        const taskId = msg.payload.task_id ?? this.leaseByReq(w, msg.re) ?? (msg.payload.code === 'SWARM_ERR_TASK_FAILED' ? this.soleLease(w, msg.re) : undefined);
        if (taskId) this.onTaskError(w, taskId, msg.payload.code, msg.payload.msg);
        else this.log.warn({ worker: w.id, code: msg.payload.code, msg: msg.payload.msg }, 'worker reported error');
        return;
      }
      case Type.ASSIGN_ROLE:
        this.roles.selfAssigned(w, msg.payload.role);
        return;
      case Type.ACK:
        this.roles.onAck(w, msg);
        return;
      default:
        w.conn.sendError('SWARM_ERR_UNEXPECTED', `hub does not accept ${msg.type} from a worker`, { re: msg.id });
    }
  }

  private onResult(w: WorkerEntry, msg: Message<'TASK_RES'>): void {
    const { text, done, receipt, seq } = msg.payload;
    // The spec's TASK_RES carries no task_id: its `re` names the TASK_REQ it answers.
    const taskId = msg.payload.task_id ?? this.leaseByReq(w, msg.re) ?? this.soleLease(w, msg.re);
    if (taskId === undefined) {
      w.conn.sendError('SWARM_ERR_UNKNOWN_TASK', 'TASK_RES names no task this worker holds: give task_id, or re = the id of its TASK_REQ', { re: msg.id });
      return;
    }
    const lease = w.inflight.get(taskId);
    if (done && !lease && !this.lateResult(w, taskId, msg.id)) return;
    if (!done) {
      if (!lease) return;
      lease.answer.add(text, seq);
      if (lease.answer.bytes > MAX_ANSWER) {
        this.onTaskError(w, taskId, 'SWARM_ERR_TASK_FAILED', `answer passed ${MAX_ANSWER} characters`, false);
      }
      return;
    }
    let full = text;
    if (lease) {
      const whole = lease.answer.finish(text, seq);
      if (!whole.ok) {
        // Pieces are missing: this attempt's answer cannot be trusted; run the task again.
        w.conn.sendError('SWARM_ERR_STREAM_GAP', whole.why, { re: msg.id, task_id: taskId });
        this.onTaskError(w, taskId, 'SWARM_ERR_STREAM_GAP', whole.why);
        return;
      }
      full = whole.text;
      this.freeSlot(w, taskId);
    }
    const rec = this.store.queue.get(taskId);
    if (!rec) { w.conn.sendError('SWARM_ERR_UNKNOWN_TASK', `unknown task ${taskId}`, { re: msg.id, task_id: taskId }); return; }
    if (!lease && (seq ?? 0) > 0) {
      // A late final frame (its lease expired or was released): the pieces before it are gone.
      this.log.warn({ worker: w.id, task: taskId, seq }, 'final frame of a streamed answer without its lease dropped');
      return;
    }
    w.done++;
    if (receipt) this.metrics.receipt(receipt);
    void this.store.complete(taskId, { text: full, receipt, worker: w.id, attempt: receipt?.attempt ?? rec.attempts })
      .then((outcome) => { if (outcome === 'duplicate') this.metrics.duplicateResults++; })
      // Not recorded: the store put the task back to run again once the journal can write.
      .catch((err) => this.log.error({ err, task: taskId }, 'journal write failed; result not recorded'));
  }

  /**
   * A final TASK_RES from a worker without the task's lease is recorded by no one: only the worker
   * holding the lease may answer (another worker's "result" would otherwise be kept and the real
   * one dropped as a duplicate). False when it is refused; true for a task already final (counted
   * as a duplicate below) so late echoes of finished work stay quiet.
   */
  private lateResult(w: WorkerEntry, taskId: string, re: string): boolean {
    const rec = this.store.queue.get(taskId);
    if (!rec || rec.state === 'done' || rec.state === 'failed') return true;
    this.log.warn({ worker: w.id, task: taskId, holder: rec.state === 'leased' ? rec.worker : undefined }, 'final TASK_RES from a worker that does not hold the lease refused');
    w.conn.sendError('SWARM_ERR_UNKNOWN_TASK', `task ${taskId} is not leased to ${w.id}; its result is not recorded`, { re, task_id: taskId });
    return false;
  }

  /**
   * A TASK_RES or ERROR that failed validation (it was answered with its code) still ends the
   * attempt it is about, when that can be told from `payload.task_id` or the envelope `re`:
   * otherwise the task would sit leased until its lease expires.
   */
  private onBadFrame(w: WorkerEntry, frame: unknown, why: string): void {
    if (this.registry.get(w.id) !== w || !frame || typeof frame !== 'object') return;
    const f = frame as Record<string, unknown>;
    if (f.type !== Type.ERROR && f.type !== Type.TASK_RES) return;
    const p = f.payload && typeof f.payload === 'object' ? f.payload as Record<string, unknown> : {};
    const taskId = typeof p.task_id === 'string' && w.inflight.has(p.task_id) ? p.task_id : this.leaseByReq(w, f.re);
    if (taskId === undefined) return;
    this.onTaskError(w, taskId, 'SWARM_ERR_TASK_FAILED', `worker sent an invalid ${f.type}: ${why}`.slice(0, 4000));
  }

  /** The task this worker holds whose TASK_REQ had id `re`. */
  /**
   * The spec's own envelope has no `re`: a frame naming neither task nor request, from a worker that
   * holds exactly one task, is about that task (there is nothing else it could mean).
   */
  private soleLease(w: WorkerEntry, re: unknown): string | undefined {
    return re === undefined && w.inflight.size === 1 ? w.inflight.keys().next().value : undefined;
  }

  private leaseByReq(w: WorkerEntry, re: unknown): string | undefined {
    if (typeof re !== 'string') return undefined;
    for (const [id, lease] of w.inflight) if (lease.reqId === re) return id;
    return undefined;
  }

  private onTaskError(w: WorkerEntry, taskId: string, code: ErrorCode, text: string, retryable = isRetryable(code)): void {
    if (!w.inflight.has(taskId)) return;
    this.freeSlot(w, taskId);
    if (code === 'SWARM_ERR_SLOTS_FULL') { this.store.unlease(taskId, w.id); this.scheduleDispatch(); return; }
    if (code === 'SWARM_ERR_ENGINE_START') {
      // Not the task's fault: it goes back without using an attempt, and this worker gets no task
      // for a while (its engine retries) so the task finds another worker meanwhile.
      this.store.unlease(taskId, w.id);
      this.free.delete(w);
      setTimeout(() => { if (this.registry.get(w.id) === w) { this.free.add(w); this.scheduleDispatch(); } }, ENGINE_COOLDOWN_MS).unref();
      this.log.warn({ worker: w.id, task: taskId, msg: text }, 'worker engine failed to start; task requeued without using an attempt');
      this.scheduleDispatch();
      return;
    }
    this.log.warn({ worker: w.id, task: taskId, code, msg: text }, 'task failed on worker');
    void this.store.fail(taskId, w.id, { code, msg: text }, retryable)
      .then(() => this.armReadyTimer())
      .catch((err) => this.log.error({ err, task: taskId }, 'journal write failed'));
  }

  private freeSlot(w: WorkerEntry, taskId: string): void {
    w.inflight.delete(taskId);
    w.freedAt = performance.now();
    if (w.inflight.size < w.slots) this.free.add(w);
    w.status = w.inflight.size ? 'busy' : 'idle';
    this.scheduleDispatch();
  }

  /** Remove a worker: its leased tasks go back to the queue at once. */
  private drop(w: WorkerEntry, reason: string, down = true): void {
    if (this.registry.get(w.id) !== w) return;
    this.registry.remove(w.id);
    this.free.delete(w);
    w.status = 'dead';
    this.failover.leave(w);
    const back = this.store.release(w.id);
    for (const r of back) this.failover.changed(r);
    if (!w.conn.isClosed) w.conn.destroy(reason);
    this.log.info({ worker: w.id, reason, requeued: back.length }, 'worker left');
    if (!this.stopping) this.roles.left();
    if (down) this.events.workerDown?.(w.id, reason);
    this.scheduleDispatch();
  }

  private tick(now: number): void {
    for (const w of [...this.registry.all()]) {
      if (now - w.lastSeen > this.config.deadAfterMs) this.drop(w, `silent for ${now - w.lastSeen} ms`);
      else w.conn.send(Type.HEARTBEAT, { load: 0, status: 'hub' });
    }
    const expired = this.store.expireLeases();
    for (const rec of expired) {
      for (const w of this.registry.all()) if (w.inflight.delete(rec.id) && w.inflight.size < w.slots) this.free.add(w);
    }
    // Also after a journal write failed: leasing was held back for a moment, nothing else wakes it.
    if (expired.length || this.store.holding || this.store.queue.counts().queued) this.scheduleDispatch();
    this.armReadyTimer();
  }

  /** Wake the dispatcher when the earliest backed-off task becomes ready. */
  private armReadyTimer(): void {
    const at = this.store.queue.nextReadyAt();
    if (at === undefined || this.stopping) return;
    if (this.readyTimer) clearTimeout(this.readyTimer);
    this.readyTimer = setTimeout(() => this.scheduleDispatch(), Math.max(0, at - Date.now()) + 1);
  }

  scheduleDispatch(): void {
    if (this.dispatchScheduled || this.stopping) return;
    this.dispatchScheduled = true;
    setImmediate(() => this.dispatch());
  }

  private dispatch(): void {
    this.dispatchScheduled = false;
    let progress = true;
    while (progress && this.free.size > 0) {
      progress = false;
      for (const w of this.free) {
        if (w.inflight.size >= w.slots || !w.conn.writable) { this.free.delete(w); continue; }
        let rec = this.store.lease({ id: w.id, role: w.role || undefined, caps: w.caps });
        if (!rec) continue;
        // Cache-aware: an equal free worker whose last prompt starts like this one gets it instead.
        const to = this.affine(w, rec.spec.prompt);
        if (to !== w && this.store.unlease(rec.id, w.id)) rec = this.store.lease({ id: to.id, role: to.role || undefined, caps: to.caps });
        if (!rec) continue;
        this.send(to, rec);
        progress = true;
      }
    }
  }

  /** Of the free workers that could run what `w` was given, the one whose last prompt shares the longest start with `prompt`. */
  private affine(w: WorkerEntry, prompt: string): WorkerEntry {
    if (this.free.size < 2) return w;
    const same = [w];
    for (const o of this.free) {
      if (o !== w && o.role === w.role && o.inflight.size < o.slots && o.conn.writable && o.caps.length === w.caps.length && o.caps.every((c) => w.caps.includes(c))) same.push(o);
    }
    return same.length < 2 ? w : same[pickByPrefix(prompt, same.map((o) => this.lastPrompt.get(o.id)))]!;
  }

  private send(w: WorkerEntry, rec: TaskRecord): void {
    const s = rec.spec;
    this.lastPrompt.set(w.id, s.prompt.length > 65_536 ? s.prompt.slice(0, 65_536) : s.prompt);
    const now = performance.now();
    const reqId = w.conn.send(Type.TASK_REQ, {
      task_id: rec.id, prompt: s.prompt, stop: s.stop ?? [], attempt: rec.attempts, role: s.role,
      max_tokens: s.max_tokens, temperature: s.temperature, seed: s.seed, grammar: s.grammar,
      json_schema: s.json_schema, timeout_ms: s.timeout_ms,
    });
    w.inflight.set(rec.id, { leasedAt: now, reqId, answer: new Answer() });
    this.failover.changed(rec);
    w.status = 'busy';
    const readyAt = this.readyAt.get(rec.id) ?? 0;
    this.readyAt.delete(rec.id);
    this.metrics.dispatched(now - Math.max(w.freedAt, readyAt));
  }
}

function listen(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => { server.off('error', reject); resolve(); });
  });
}

function sleep(ms: number): Promise<void> { return new Promise((r) => setTimeout(r, ms)); }
