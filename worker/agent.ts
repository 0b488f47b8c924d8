import os from 'node:os';
import type { Logger } from 'pino';
import { ENDS_SOON_CAP, SwarmError, Type, errorCodeOf, isErrorCode, type ErrorCode, type Connection, type Message, type AnyMessage } from '../protocol/index.js';
import { isRetryable } from '../sched/retry.js';
import { isPermanentEngineError, type AheadTicket, type Driver } from '../drivers/index.js';
import { WorkerClient, type HubLocator } from './client.js';
import { WORKER_DEFAULTS, type WorkerConfig } from './config.js';
import { LazyAbort } from './lazy-abort.js';
import { workerKey } from '../protocol/result-mac.js';
import { hostId } from './host-id.js';
import type { AgentFailover, AgentFailoverOptions } from './failover-agent.js';
import type { ExecOutcome, ReplicaSpec } from './gossip/index.js';
import { AgentEngine, type EngineState } from './agent-engine.js';
import { aheadChatOptions, drive, type DriveDeps, type DriveExtras } from './drive.js';

/** The worker state machine of the spec, section 5.1. */
export const AgentState = { INIT: 'INIT', SPAWN: 'SPAWN', IDLE: 'IDLE', BUSY: 'BUSY', COOLDOWN: 'COOLDOWN', STOPPED: 'STOPPED' } as const;
export type AgentState = (typeof AgentState)[keyof typeof AgentState];

export interface AgentOptions {
  id: string;
  driver: Driver;
  locate: HubLocator;
  token?: string;
  role?: string;
  caps?: string[];
  slots?: number;
  msgpack?: boolean;
  loopRepeats?: number;
  /** Validated settings (worker/config.ts); the defaults when absent. */
  config?: WorkerConfig;
  /** Hybrid star-gossip failover: open a peer port and keep running when the hub dies. */
  failover?: AgentFailoverOptions;
  /** Called once when the hub sends KILL or the agent is stopped. */
  onStopped?: (reason: string) => void;
}

interface Running { abort: LazyAbort; /** Tell the hub this task goes back unfinished (the agent stops). */ handBack?: () => void }
/**
 * A TASK_REQ held until a slot frees (the hub leases the queue while tasks are short, or one task ahead
 * of a running one's end); `ahead`: its chat is already queued at the engine (Driver.chatAhead).
 */
interface Queued { m: Message<'TASK_REQ'>; conn: Connection; at: number; ahead?: AheadTicket }

/**
 * One agent: a network loop (WorkerClient) and a driver side by side. Tasks run concurrently with
 * the heartbeat, up to `slots` at a time; results stream back as TASK_RES.
 */
export class Agent {
  state: AgentState = AgentState.INIT;
  readonly client: WorkerClient;
  /** Why the hub refused this agent (wrong token or certificate), when that ended it. */
  refused?: SwarmError;
  private readonly running = new Map<string, Running>();
  private readonly slots: number;
  /** TASK_REQs beyond the slots, in arrival order; started as slots free, given back if held too long. */
  private readonly queued: Queued[] = [];
  private readonly queueMax: number;
  private holdTimer?: NodeJS.Timeout;
  private readonly cfg: WorkerConfig;
  private stopping = false;
  private readonly engine: AgentEngine;
  /** The engine state the hub was last told of. */
  private told: EngineState = 'starting';
  private readonly driveDeps: DriveDeps;
  /** Set with `failover` once run() has begun: the gossip side of this agent. */
  failover?: AgentFailover;
  private peerAddr?: string;
  /** Why this agent runs without failover though asked for it (HANDSHAKE `failover_error`: the hub's status shows it). */
  private failoverError?: { code: ErrorCode; msg: string };
  /** The role this agent takes tasks for: from its options, then from the hub's ASSIGN_ROLE (kept across reconnects). */
  role?: string;

  constructor(private readonly opts: AgentOptions, private readonly log: Logger) {
    this.cfg = opts.config ?? WORKER_DEFAULTS;
    this.slots = opts.slots ?? this.cfg.agent.slots;
    this.queueMax = this.cfg.agent.queue;
    this.role = opts.role;
    this.engine = new AgentEngine(opts.driver, log, (e) => this.engineIs(e));
    this.driveDeps = { driver: opts.driver, engine: this.engine, workerId: opts.id, loopRepeats: opts.loopRepeats ?? this.cfg.agent.loopRepeats };
    this.client = new WorkerClient({
      id: opts.id, locate: opts.locate, token: opts.token, msgpack: opts.msgpack, maxLine: this.cfg.agent.maxLine, ...this.cfg.client,
      handshake: () => ({ driver: opts.driver.name, caps: this.caps(), worker_id: opts.id, role: this.role, slots: this.slots, queue: this.queueMax, pid: process.pid, host_id: hostId(), peer_addr: this.peerAddr, failover_error: this.failoverError, engine: this.engine.state, sync: this.failover?.takeSyncMark() }),
    }, log);
    this.client.heartbeatPayload = () => {
      const fo = this.failover?.status();
      return {
        load: Math.min(1, this.running.size / this.slots), status: this.running.size ? 'busy' : 'idle',
        inflight: this.running.size + this.queued.length, state: this.state,
        ...(fo ? { mode: fo.mode, coordinator: fo.coordinator, epoch: fo.epoch } : {}),
        engine: this.engine.state,
        ...(this.engine.state === 'failed' ? { engine_error: this.engine.message().slice(0, 4096) } : {}),
        ...this.engine.fallback(),
      };
    };
    this.client.onMessage((m, conn) => this.onMessage(m, conn));
    this.client.onStatus((s) => {
      if (s.type === 'killed') void this.stop(`KILL: ${s.reason}`);
      if (s.type === 'refused') { this.refused = s.error; void this.stop(`refused by the hub: ${s.error.message}`); }
      if (s.type === 'disconnected' && this.failover) {
        // Failover: tasks keep running; their results go to the replica and, later, to a hub.
        this.failover.disconnected();
        log.info({ reason: s.reason }, 'disconnected from hub');
      } else if (s.type === 'disconnected') {
        // The hub requeues what this worker held; stop spending the engine on it.
        // Free the slots at once: a reconnect brings new leases before the aborted runs unwind.
        for (const r of this.running.values()) r.abort.abort(new SwarmError('SWARM_ERR_SHUTDOWN', 'hub connection lost'));
        this.running.clear();
        this.dropQueued();
        log.info({ reason: s.reason }, 'disconnected from hub');
      }
      if (s.type === 'connected') {
        log.info('connected to hub');
        if (this.failover && this.client.conn) this.failover.connected(this.client.conn);
      }
    });
  }

  /** Start the driver and the network loop side by side (spec 5.3). */
  async run(): Promise<void> {
    this.state = AgentState.SPAWN;
    void this.engine.start(START_RETRIES);
    if (this.opts.failover) {
      // The gossip code loads only for a failover worker (17 modules a plain worker does without).
      const { AgentFailover } = await import('./failover-agent.js');
      if (this.stopping) return;
      this.failover = new AgentFailover(this.opts.id, this.opts.failover.peerToken ?? this.opts.token, this.slots, (spec, attempt) => this.execute(spec, attempt), { config: this.cfg, resultKey: this.opts.token ? workerKey(this.opts.token, this.opts.id) : undefined, ...this.opts.failover }, this.log);
      this.client.onFrame = (m) => this.failover!.heard(m);
      this.client.onLink = (s) => this.failover!.link(s);
      try {
        this.peerAddr = await this.failover.listen();
      } catch (err) {
        // No peer port: this agent runs as a star-only worker (without a peer_addr the hub never makes
        // it a member or a replica holder; its tasks go through the hub) rather than crash the process.
        const code = errorCodeOf(err, 'SWARM_ERR_PEER_PORT');
        this.log.error({ code, worker: this.opts.id }, `failover off for this agent: ${(err as Error).message}`);
        this.failoverError = { code, msg: (err as Error).message.slice(0, 4096) };
        this.failover.stop();
        this.failover = undefined;
        this.client.onFrame = () => {};
        this.client.onLink = () => {};
      }
    }
    await this.client.run();
  }

  /** The hub hears at once when the engine becomes ready or fails, not at the next heartbeat. */
  private engineIs(e: EngineState): void {
    if (this.state === AgentState.SPAWN) this.state = AgentState.IDLE;
    const changed = e !== this.told || e === 'failed';
    this.told = e;
    const conn = this.client.conn;
    if (changed && conn && !conn.isClosed) conn.send(Type.HEARTBEAT, this.client.heartbeatPayload());
  }

  async stop(reason: string): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.log.info({ reason }, 'agent stopping');
    // Handed back before the link closes: the hub requeues each at once and uses no attempt. Closed
    // without a word, every lease cost an attempt, so a rolling restart (SIGTERM to each worker in
    // turn) that met a long task three times failed it for good.
    for (const q of this.queued) this.answerQueued(q, 'SWARM_ERR_SLOTS_FULL', `worker stopping (${reason}); given back`);
    this.queued.length = 0;
    for (const r of this.running.values()) r.handBack?.();
    for (const r of this.running.values()) r.abort.abort(new SwarmError('SWARM_ERR_SHUTDOWN', reason));
    this.state = AgentState.STOPPED;
    this.client.stop();
    this.failover?.stop();
    await this.engine.stop();
    this.opts.onStopped?.(reason);
  }

  private onMessage(m: AnyMessage, conn: Connection): void {
    if (this.failover?.onMessage(m)) return;
    if (m.type === Type.TASK_REQ) {
      // Finished already (in gossip mode, here or on a peer): answer from the replica, run nothing.
      const done = this.failover?.finished(m.payload.task_id);
      if (done) {
        conn.send(Type.TASK_RES, { task_id: m.payload.task_id, text: done.text, done: true, seq: 0, receipt: done.receipt }, { re: m.id });
        return;
      }
      // Failed for good in gossip mode: the hub records that failure (permanent: no retry), nothing runs.
      const failed = this.failover?.failedHere(m.payload.task_id);
      if (failed) {
        conn.send(Type.ERROR, { code: isErrorCode(failed.code) ? failed.code : 'SWARM_ERR_TASK_FAILED', msg: failed.msg.slice(0, 4000), status: 500, task_id: m.payload.task_id, fatal: false, permanent: true }, { re: m.id });
        return;
      }
      if (this.running.size < this.slots && !this.queued.length) { void this.runTask(m, conn); return; }
      if (this.queued.length < this.queueMax && !this.stopping) { this.enqueue(m, conn); return; }
      conn.sendError('SWARM_ERR_SLOTS_FULL', `worker has ${this.slots} slot(s) and ${this.queueMax} queue place(s)`, { re: m.id, task_id: m.payload.task_id });
    } else if (m.type === Type.ASSIGN_ROLE) {
      // Take the role, so the HANDSHAKE of a reconnect carries it, then acknowledge.
      this.role = m.payload.role || undefined;
      this.log.info({ role: m.payload.role }, 'role assigned');
      conn.send(Type.ACK, { ok: true }, { re: m.id });
    } else if (m.type === Type.ERROR && m.payload.code === 'SWARM_ERR_CANCELLED' && m.payload.task_id) {
      // The hub cancelled the task (its run was cancelled): stop spending the engine on it.
      const q = this.queued.findIndex((x) => x.m.payload.task_id === m.payload.task_id);
      if (q >= 0) this.answerQueued(this.queued.splice(q, 1)[0]!, 'SWARM_ERR_CANCELLED', m.payload.msg || 'cancelled');
      this.running.get(m.payload.task_id)?.abort.abort(new SwarmError('SWARM_ERR_CANCELLED', m.payload.msg || 'cancelled'));
      this.log.info({ task: m.payload.task_id }, 'task cancelled by the hub');
    } else if (m.type === Type.ERROR) {
      this.log.warn({ code: m.payload.code, msg: m.payload.msg }, 'hub reported error');
    }
  }

  /** HANDSHAKE caps: its own, and `ends-soon` where its driver tells when a chat ends and it has a queue place. */
  private caps(): string[] {
    const caps = this.opts.caps ?? [];
    return this.saysEnds && !caps.includes(ENDS_SOON_CAP) ? [...caps, ENDS_SOON_CAP] : caps;
  }

  private async runTask(m: Message<'TASK_REQ'>, conn: Connection, ahead?: AheadTicket): Promise<void> {
    const p = m.payload;
    const abort = new LazyAbort();
    const mine: Running = {
      abort,
      handBack: () => { mine.handBack = undefined; conn.sendError('SWARM_ERR_SHUTDOWN', 'worker stopping; task given back unfinished', { re: m.id, task_id: p.task_id }); },
    };
    const fo = this.failover;
    this.running.set(p.task_id, mine);
    fo?.adopt(p.task_id);
    this.state = AgentState.BUSY;
    let seq = 0;
    // Partials only while someone watches (TASK_REQ `stream`), and then gathered for PARTIAL_MS: a
    // message per token woke this process and the hub once per token.
    let buf = '';
    let timer: NodeJS.Timeout | undefined;
    const flush = (): void => {
      timer = undefined;
      if (buf && !conn.isClosed) conn.send(Type.TASK_RES, { task_id: p.task_id, text: buf, done: false, seq: seq++ }, { re: m.id });
      buf = '';
    };
    try {
      // With failover too: a partial answer records nothing on the hub.
      const onChunk = p.stream === false ? undefined : (text: string) => { buf += text; timer ??= setTimeout(flush, PARTIAL_MS); };
      const out = await drive(this.driveDeps, p, abort, onChunk, { ...(ahead ? { ahead } : {}), ...this.endingFor(conn) });
      clearTimeout(timer);
      // With failover the whole answer goes to the replica before the final frame reports it, so a
      // hub that dies now cannot lose it.
      if (fo) fo.localResult(p.task_id, p.attempt, out.full, out.receipt);
      // A result for a connection that has gone is handed back from the replica instead.
      const text = onChunk ? buf + out.last : out.full;
      if (!conn.isClosed) conn.send(Type.TASK_RES, { task_id: p.task_id, text, done: true, seq, receipt: out.receipt }, { re: m.id });
    } catch (err) {
      clearTimeout(timer);
      const code = errorCodeOf(err);
      const msg = (err as Error)?.message ?? String(err);
      this.log.warn({ task: p.task_id, code, msg }, 'task failed');
      if (isPermanentEngineError(err)) conn.send(Type.ERROR, { code, msg: msg.slice(0, 4000), status: 500, task_id: p.task_id, fatal: false, permanent: true }, { re: m.id });
      // Once handed back (handBack cleared) the hub has its answer: the abort's error is not a second one.
      else if (mine.handBack) conn.sendError(code, msg.slice(0, 4000), { re: m.id, task_id: p.task_id });
    } finally {
      fo?.release(p.task_id);
      if (this.running.get(p.task_id) === mine) this.running.delete(p.task_id);
      if (this.running.size === 0 && !this.stopping) {
        this.state = AgentState.IDLE;
      }
      this.pump();
    }
  }

  /** How long before a task ends the hub wants word of it (HANDSHAKE_ACK `lease_ahead_ms`); 0: it does not. */
  private leadMs(): number {
    return this.saysEnds ? this.client.config.lease_ahead_ms : 0;
  }

  /** It can tell the hub a task ends soon: its driver says so, and it has a queue place for the next. */
  private get saysEnds(): boolean { return this.queueMax > 0 && this.opts.driver.tellsEnd === true; }

  /**
   * Tell the hub when a task is about to end (its engine reckons so), so the next one is leased into
   * this worker's queue then and is here when the slot frees. Only with a queue place free: a task
   * already waits otherwise.
   */
  private endingFor(conn: Connection): Pick<DriveExtras, 'endsWithinMs' | 'onEnding'> {
    const endsWithinMs = this.leadMs();
    if (endsWithinMs <= 0) return {};
    return { endsWithinMs, onEnding: () => {
      if (conn.isClosed || this.stopping || this.queued.length >= this.queueMax) return;
      conn.send(Type.HEARTBEAT, { load: 1, status: 'busy', ending: true });
    } };
  }

  private enqueue(m: Message<'TASK_REQ'>, conn: Connection): void {
    const q: Queued = { m, conn, at: performance.now() };
    this.queued.push(q);
    // Behind the one running chat: the engine takes it at once and starts it as that one ends, without
    // the round trip through this process (its result out, this chat in). One slot only: with more,
    // the chat that ends first need not be the one it waits behind.
    const d = this.driveDeps.driver;
    if (d.chatAhead && this.slots === 1 && this.queued.length === 1 && this.running.size === 1 && this.engine.state === 'ready') q.ahead = d.chatAhead(m.payload.prompt, aheadChatOptions(m.payload, this.leadMs()));
    // Leased to this worker: in gossip mode its executor must not start it a second time.
    this.failover?.adopt(m.payload.task_id);
    if (!this.holdTimer) this.armHold(this.cfg.agent.queueHoldMs);
  }

  /** Start queued tasks while slots are free. */
  private pump(): void {
    while (this.running.size < this.slots && this.queued.length && !this.stopping) {
      const q = this.queued.shift()!;
      void this.runTask(q.m, q.conn, q.ahead);
    }
  }

  /**
   * One timer while tasks are queued, not one per task: when it fires, a queued task that waited out
   * the hold time is behind a long one, so it and everything behind it go back to the hub
   * (SLOTS_FULL), which runs them elsewhere and leases this worker only its slots until it finishes
   * a task. Otherwise it waits for the oldest one's turn. Tasks of a link that has gone stay: the hub
   * has re-queued them, and with failover their results still reach the replica.
   */
  private armHold(ms: number): void {
    // Decided after the loop's I/O of this turn (setImmediate runs after the poll phase, a timer before
    // it): a result that arrived by the hold's end frees the slot first, and the queued task runs
    // rather than go back; its chat may already run in the engine, sent ahead behind that result.
    this.holdTimer = setTimeout(() => setImmediate(() => {
      this.holdTimer = undefined;
      const open = this.queued.filter((q) => !q.conn.isClosed);
      if (!open.length) return;
      const hold = this.holdFor(open[0]!);
      const waited = performance.now() - open[0]!.at;
      if (waited < hold) { this.armHold(hold - waited); return; }
      this.queued.splice(0, this.queued.length, ...this.queued.filter((q) => q.conn.isClosed));
      for (const q of open) this.answerQueued(q, 'SWARM_ERR_SLOTS_FULL', `not started within ${hold} ms (a long task is ahead of it); given back`);
      this.log.info({ tasks: open.length }, 'queued tasks given back: a long task is ahead of them');
    }), ms);
    this.holdTimer.unref();
  }

  /**
   * How long a queued task may wait for its turn. One leased on the engine's word that the running task
   * ends within the lead, and already queued in the engine behind it, waits longer: the engine starts it
   * the moment that task ends, and every other worker was busy when it was leased (so none would start
   * it sooner); under load a step's pace varies, and the plain hold gave back a fifth of them.
   */
  private holdFor(q: Queued): number {
    const hold = this.cfg.agent.queueHoldMs;
    return q.ahead ? Math.max(hold, AHEAD_HOLD_LEADS * this.leadMs()) : hold;
  }

  /** A queued task leaves without running: the hub hears why, and the executor may take it again. */
  private answerQueued(q: Queued, code: 'SWARM_ERR_SLOTS_FULL' | 'SWARM_ERR_CANCELLED', msg: string): void {
    this.withdraw(q);
    this.failover?.release(q.m.payload.task_id);
    q.conn.sendError(code, msg, { re: q.m.id, task_id: q.m.payload.task_id });
  }

  /** The hub re-queues what this worker held (its link closed, or the agent stops): nothing queued runs. */
  private dropQueued(): void {
    for (const q of this.queued) { this.withdraw(q); this.failover?.release(q.m.payload.task_id); }
    this.queued.length = 0;
  }

  /** A queued task leaves unrun: its chat sent ahead to the engine is taken back (never started there). */
  private withdraw(q: Queued): void {
    if (q.ahead) this.driveDeps.driver.withdrawAhead?.(q.ahead);
    q.ahead = undefined;
  }

  /** Gossip mode: run a task the acting coordinator assigned (a replicated spec). */
  private async execute(spec: ReplicaSpec, attempt: number): Promise<ExecOutcome> {
    const abort = new LazyAbort();
    const mine: Running = { abort };
    const id = spec.id;
    this.running.set(id, mine);
    this.state = AgentState.BUSY;
    try {
      const out = await drive(this.driveDeps, {
        task_id: id, prompt: String(spec.prompt ?? ''), stop: (spec.stop as string[] | undefined) ?? [], attempt,
        max_tokens: spec.max_tokens as number | undefined, temperature: spec.temperature as number | undefined,
        seed: spec.seed as number | undefined, grammar: spec.grammar as string | undefined,
        json_schema: spec.json_schema as Record<string, unknown> | undefined, timeout_ms: spec.timeout_ms, stream: false,
      }, abort);
      return { text: out.full, receipt: out.receipt };
    } catch (err) {
      const code = errorCodeOf(err);
      return { error: { code, msg: ((err as Error)?.message ?? String(err)).slice(0, 4000) }, final: !isRetryable(code) || isPermanentEngineError(err) };
    } finally {
      if (this.running.get(id) === mine) this.running.delete(id);
      if (this.running.size === 0 && !this.stopping) this.state = AgentState.IDLE;
      this.pump();
    }
  }
}

/** Partial answers, while someone watches, go out at most this often. */
const PARTIAL_MS = 40;

/** A failed start at spawn is tried this many times more before the hub hears `failed`. */
const START_RETRIES = 2;

/** The host's load average over one minute divided by cores, for status. */
export function hostLoad(): number { return os.loadavg()[0]! / Math.max(1, os.cpus().length); }

/** A task queued in the engine behind its running one waits up to this many leads before it goes back (holdFor). */
const AHEAD_HOLD_LEADS = 4;
