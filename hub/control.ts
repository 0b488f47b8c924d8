import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import { SwarmError, safeEqual } from '../protocol/index.js';
import { readBody as readBodyMax, send, sendError } from './http.js';
import { Registry } from './registry.js';
import type { Hub } from './hub.js';
import type { TaskInput } from './task.js';
import type { RunManager } from './runs.js';
import { handleRuns } from './runs-api.js';
import { checkRolePlan } from './roles.js';
import type { Dashboard, FeedOptions } from './dashboard/index.js';
import { Waits, taskView as view } from './wait.js';
import { journalMetrics, journalStatus } from './journal-report.js';
import { handshakeCause, rememberRemotes, remoteOf } from './tls-refusal.js';
import { MAX_SHORT_TEXT } from '../protocol/bounds.js';

const MAX_BODY = 64 * 1024 * 1024;
/**
 * Tasks in one `POST /tasks`. A batch is validated and journaled in one turn of the event loop
 * (all or none): a million tiny tasks held the hub ~50 s, long enough for every worker to call it
 * dead. Past this the request is refused at once; `swarm submit` sends 5,000 at a time.
 */
export const MAX_TASKS_PER_REQUEST = 100_000;
const readBody = (req: http.IncomingMessage): Promise<string> => readBodyMax(req, MAX_BODY);
/** Idle keep-alive connections are closed by the server after this long (exported for tests). */
export const KEEP_ALIVE_MS = 65_000;

export interface ControlOptions {
  host: string;
  port: number;
  token?: string;
  /** Serve HTTPS with this certificate: a control API reachable from other machines carries the token. */
  tls?: { cert: Buffer | string; key: Buffer | string };
  /** Extra fields for /status (supervisor, mode, …). */
  status?: () => Record<string, unknown>;
  /** `all`: KILL every worker (`swarm down`); `supervised`: only the hub's own processes (a signal, a restart). */
  onShutdown?: (workers: 'all' | 'supervised') => void;
  /** Dashboard stream settings (tests make it tick fast and stall early). */
  dashboard?: Partial<FeedOptions>;
}

/** The hub's HTTP control API: status, submit, wait, metrics, kill, shutdown. Loopback by default. */
export class ControlServer {
  private server?: http.Server;
  /** Topology runs; they need a state directory (their spec is journaled, their folders live there). */
  runs?: RunManager;
  private runsLoading?: Promise<void>;
  private dash?: Dashboard;
  private dashLoading?: Promise<Dashboard>;
  /** POST /wait: bounded in number, streamed with backpressure. */
  readonly waits = new Waits(() => this.hub.store);
  constructor(private readonly hub: Hub, private readonly opts: ControlOptions, private readonly log: Logger) {}

  async start(): Promise<{ host: string; port: number }> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => { this.route(req, res).catch((err) => sendError(res, err)); };
    this.server = this.opts.tls ? https.createServer({ cert: this.opts.tls.cert, key: this.opts.tls.key }, handler) : http.createServer(handler);
    // A client that does not trust the certificate hangs up in the handshake: say so here too.
    rememberRemotes(this.server);
    this.server.on('tlsClientError', (err: NodeJS.ErrnoException, s: net.Socket) => this.hub.refusals.warn({ remote: remoteOf(s), code: err.code, err: handshakeCause(err) }, 'control API: TLS handshake refused'));
    // Keep idle connections well past the pools of common clients (undici/fetch ~4 s, Node's agent
    // 5 s, proxies 60 s): a server that closes first races a client reusing the socket, and the
    // client gets "other side closed" / ECONNRESET. headersTimeout must stay above it (Node's rule).
    this.server.keepAliveTimeout = KEEP_ALIVE_MS;
    this.server.headersTimeout = KEEP_ALIVE_MS + 1000;
    // A request's body must arrive within this (a client trickling bytes holds a socket and a buffer).
    this.server.requestTimeout = 120_000;
    // Bounded like the worker port (hub/conn-caps.ts): idle keep-alive sockets would otherwise take every fd.
    this.server.maxConnections = this.hub.connCaps.control;
    this.server.on('drop', (d?: { remoteAddress?: string; remotePort?: number }) => this.hub.connectionRefused('control', d));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.opts.port, this.opts.host, () => resolve());
    });
    const a = this.server.address() as { address: string; port: number };
    // Runs journaled by an earlier hub continue from their spec and the results already stored.
    if (this.hub.config.stateDir && fs.existsSync(this.runsDir())) void this.loadRuns().catch(() => {});
    return { host: a.address, port: a.port };
  }

  private runsDir(): string { return path.join(this.hub.config.stateDir ?? '', 'runs'); }

  /**
   * The topology code (topologies/, yaml, their zod schemas) loads on the first /runs request, or at
   * start when there are runs to resume: a hub that `swarm up` starts spends that CPU before its
   * workers can start, on two cores shared with them.
   */
  private loadRuns(): Promise<void> {
    if (!this.hub.config.stateDir) return Promise.resolve();
    this.runsLoading ??= import('./runs.js').then(({ RunManager, swarmVersion }) => {
      this.runs ??= new RunManager(this.hub, {
        dir: this.runsDir(), version: swarmVersion(), log: this.log.child({ part: 'runs' }),
        engine: () => ((this.opts.status?.() as { engine?: { mode?: string } } | undefined)?.engine?.mode),
      });
      this.runs.resumeAll().catch((err: unknown) => this.log.error({ err }, 'resuming runs failed'));
    }, (err: unknown) => { this.log.error({ err }, 'loading runs failed'); throw err; });
    return this.runsLoading;
  }

  /** The dashboard (page, event stream, tickets); its code loads on first use, like the runs'. */
  dashboard(): Promise<Dashboard> {
    this.dashLoading ??= import('./dashboard/index.js').then(({ Dashboard }) => {
      void this.loadRuns().catch(() => {});
      const port = (this.server?.address() as { port?: number } | null)?.port ?? this.opts.port;
      this.dash = new Dashboard({ hub: this.hub, runs: () => this.runs, supervised: () => Number(this.opts.status?.().agents_wanted ?? 0) }, port, this.log.child({ part: 'dashboard' }), this.opts.dashboard, Boolean(this.opts.tls));
      return this.dash;
    });
    return this.dashLoading;
  }

  async stop(): Promise<void> {
    this.dash?.close();
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server!.close(() => r()));
  }

  /** The status object of `swarm status --json`. */
  status(): Record<string, unknown> {
    const workers = [...this.hub.registry.all()].map(Registry.view);
    return {
      hub: {
        name: this.hub.name, pid: process.pid, address: this.hub.address, uptime_s: Math.round((Date.now() - this.hub.startedAt) / 1000),
        // Failover: a hub that answers is `star`, or `reconciling` while workers hand back.
        mode: this.hub.failover.mode, coordinator: this.hub.name,
      },
      failover: { ...this.hub.failover.stats, holders: this.hub.failover.holders(), keepers: this.hub.failover.keeperIds(), feeds: this.hub.failover.feedViews(), workers: this.hub.failover.views() },
      workers,
      tasks: this.hub.store.queue.counts(),
      journal: journalStatus(this.hub.store),
      waits: this.waits.count,
      // Each port's cap (fitted under the fd limit) and the connections it closed at accept.
      connections: { worker_cap: this.hub.connCaps.workers, control_cap: this.hub.connCaps.control, fd_limit: this.hub.connCaps.fdLimit ?? null, reserve: this.hub.connCaps.reserve, refused: { ...this.hub.metrics.connectionsRefused } },
      metrics: {
        dispatch_p50_ms: this.hub.metrics.dispatchLatency.quantile(0.5),
        dispatch_p99_ms: this.hub.metrics.dispatchLatency.quantile(0.99),
        tokens_in: this.hub.metrics.tokensIn, tokens_out: this.hub.metrics.tokensOut,
        duplicate_results: this.hub.metrics.duplicateResults,
        // Leased into a worker's queue while its slots ran (prefetch, lease-ahead), and given back unstarted.
        leases_queued: this.hub.metrics.leasedQueued, leases_queued_given_back: this.hub.metrics.queuedGivenBack,
        // The hub's own stalls (SIGSTOP, swap): leases they cost are requeued without using an attempt.
        stalls: this.hub.store.stall.stalls, longest_stall_ms: this.hub.store.stall.longestMs,
      },
      ...this.opts.status?.(),
    };
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/healthz') return send(res, 200, { ok: true });
    const bearer = !this.opts.token || safeEqual((req.headers.authorization ?? '').replace(/^Bearer /, ''), this.opts.token);
    if (url.pathname === '/dashboard' || url.pathname.startsWith('/dashboard/')) return (await this.dashboard()).route(req, res, url, bearer);
    // The dashboard's page calls the routes below with its session cookie instead of the token.
    if (!bearer && !this.dash?.authorized(req)) throw new SwarmError('SWARM_ERR_AUTH', 'missing or wrong bearer token');
    const key = `${req.method} ${url.pathname}`;
    if (key === 'GET /status') return send(res, 200, this.status());
    if (key === 'GET /metrics') {
      const workers: Record<string, number> = { idle: 0, busy: 0 };
      for (const w of this.hub.registry.all()) workers[w.status] = (workers[w.status] ?? 0) + 1;
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(this.hub.metrics.render(workers, this.hub.store.queue.counts()) + journalMetrics(this.hub.store));
      return;
    }
    if (key === 'POST /tasks') return this.submit(req, res);
    if (key === 'POST /wait') return this.waits.handle(JSON.parse((await readBody(req)) || '{}') as { ids?: unknown; timeout_ms?: unknown; stream?: unknown }, res);
    // The id from the path as sent: URL parsing takes ".." and "." for path steps (GET /tasks/.. was
    // "no route GET /"), and both are ids a task may have.
    const rawPath = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'GET' && rawPath.startsWith('/tasks/')) {
      const rec = this.hub.store.lookup(decodeURIComponent(rawPath.slice(7)));
      if (!rec) throw new SwarmError('SWARM_ERR_UNKNOWN_TASK', 'no such task');
      return send(res, 200, view(rec));
    }
    if (req.method === 'POST' && /^\/workers\/[^/]+\/kill$/.test(rawPath)) {
      const id = decodeURIComponent(rawPath.split('/')[2]!);
      if (!this.hub.kill(id, 'killed by operator')) throw new SwarmError('SWARM_ERR_CONFIG', `no worker ${id}`);
      return send(res, 200, { ok: true });
    }
    if (key === 'GET /roles') return send(res, 200, this.rolesView());
    if (key === 'POST /roles') {
      // Body {"roles":{"thinker":2,"worker":3}} (or the object alone): the new plan.
      const body = JSON.parse((await readBody(req)) || '{}') as { roles?: unknown };
      this.hub.setRolePlan(checkRolePlan(body && typeof body === 'object' && 'roles' in body ? body.roles : body));
      return send(res, 200, this.rolesView());
    }
    if (req.method === 'POST' && /^\/workers\/[^/]+\/role$/.test(rawPath)) {
      const id = decodeURIComponent(rawPath.split('/')[2]!);
      const body = JSON.parse((await readBody(req)) || '{}') as { role?: unknown; spec_ref?: unknown };
      if (typeof body?.role !== 'string' || body.role.length > MAX_SHORT_TEXT) throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', `role must be a string of at most ${MAX_SHORT_TEXT} characters`);
      if (body.spec_ref !== undefined && (typeof body.spec_ref !== 'string' || body.spec_ref.length > 4096)) throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', 'spec_ref must be a string of at most 4096 characters');
      if (!this.hub.assignRole(id, body.role, body.spec_ref as string | undefined)) throw new SwarmError('SWARM_ERR_CONFIG', `no worker ${id}`);
      return send(res, 202, { ok: true, worker: id, role: body.role });
    }
    if (key === 'POST /shutdown') {
      const body = JSON.parse((await readBody(req)) || '{}') as { workers?: unknown };
      if (body?.workers !== undefined && body.workers !== 'all' && body.workers !== 'supervised') throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', 'workers must be "all" or "supervised"');
      const workers = body?.workers === 'supervised' ? 'supervised' : 'all';
      send(res, 202, { ok: true, workers });
      setImmediate(() => this.opts.onShutdown?.(workers));
      return;
    }
    if (url.pathname === '/runs' || url.pathname.startsWith('/runs/')) await this.loadRuns();
    if (await handleRuns(this.runs, req, res, url)) return;
    send(res, 404, { code: 'SWARM_ERR_CONFIG', msg: `no route ${key}` });
  }

  /** The role plan and who holds (or was just sent) which role. */
  private rolesView(): Record<string, unknown> {
    return {
      plan: this.hub.roles.current,
      workers: [...this.hub.registry.all()].map((w) => ({ id: w.id, role: w.role, role_pending: w.pendingRole?.role })),
    };
  }

  /**
   * Body: one task object, {tasks:[…]}, or NDJSON (one task per line). Journaled before the reply.
   * `{tasks:[…], wait:{timeout_ms}}` submits and waits in one request: the answer is the streamed
   * /wait of those tasks after a first line `{"accepted":n,"duplicates":[ids]}`. That spares the
   * submitter a second request naming every id, and the gap between the two, while its tasks run.
   */
  private async submit(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { tasks, wait } = parseTasks(await readBody(req));
    // Refused before anything is journaled: a submitter told "too many waits" has submitted nothing.
    const held = wait ? this.waits.hold(wait) : undefined;
    try {
      const out = await this.hub.submit(tasks as TaskInput[]);
      if (!held) {
        send(res, 202, { accepted: out.map((o) => ({ id: o.record.id, duplicate: o.duplicate, state: o.record.state, ...(o.conflict ? { conflict: o.conflict } : {}) })) });
        return;
      }
      const conflicts = out.flatMap((o) => (o.conflict ? [{ id: o.record.id, fields: o.conflict }] : []));
      const head = { accepted: out.length, duplicates: out.filter((o) => o.duplicate).map((o) => o.record.id), ...(conflicts.length ? { conflicts } : {}) };
      await held.live(out.map((o) => o.record.id), res, `${JSON.stringify(head)}\n`);
    } finally { held?.release(); }
  }
}

function parseTasks(body: string): { tasks: unknown[]; wait?: { timeout_ms?: unknown } } {
  const out = parseBody(body);
  tooMany(out.tasks.length);
  return out;
}

function tooMany(n: number): void {
  if (n <= MAX_TASKS_PER_REQUEST) return;
  throw new SwarmError('SWARM_ERR_TOO_LARGE', `${n} tasks in one request; at most ${MAX_TASKS_PER_REQUEST.toLocaleString('en-US')}: send them in several (nothing of this one was accepted)`);
}

function parseBody(body: string): { tasks: unknown[]; wait?: { timeout_ms?: unknown } } {
  const trimmed = body.trim();
  if (!trimmed) throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', 'empty body');
  let v: unknown;
  try { v = JSON.parse(trimmed); } catch {
    const lines = trimmed.split('\n').filter((l) => l.trim());
    // Counted before a line is parsed: parsing a million of them is itself the stall.
    tooMany(lines.length);
    return {
      tasks: lines.map((line, i) => {
        try { return JSON.parse(line) as unknown; } catch { throw new SwarmError('SWARM_ERR_BAD_JSON', `line ${i + 1} is not valid JSON`); }
      }),
    };
  }
  if (v && typeof v === 'object' && !Array.isArray(v) && Array.isArray((v as { tasks?: unknown }).tasks)) {
    const { tasks, wait } = v as { tasks: unknown[]; wait?: unknown };
    if (wait === undefined) return { tasks };
    if (!wait || typeof wait !== 'object' || Array.isArray(wait)) throw new SwarmError('SWARM_ERR_BAD_PAYLOAD', 'wait must be an object, {"timeout_ms":n}');
    return { tasks, wait: wait as { timeout_ms?: unknown } };
  }
  return { tasks: Array.isArray(v) ? v : [v] };
}
