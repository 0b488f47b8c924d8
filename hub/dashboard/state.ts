import fs from 'node:fs';
import path from 'node:path';
import type { Answer } from '../answer.js';
import type { Hub } from '../hub.js';
import type { WorkerEntry } from '../registry.js';
import type { RunManager } from '../runs.js';
import type { StoreEvent } from '../store-events.js';
import type { TaskRecord } from '../task.js';
import type { DashState, HubView, NodeRow, QueueView, RunRow, Sample, WorkerRow } from './types.js';

/** What the dashboard reads: the hub, its runs (loaded lazily) and how many workers it supervises. */
export interface DashSource {
  hub: Hub;
  runs(): RunManager | undefined;
  supervised(): number;
}

/** Tokens/s (the queue's and each worker's) spans this many chart samples. */
const TPS_SAMPLES = 5;
const TASK_ONLY: readonly Section[] = ['queue', 'workers'];
const WORKERS: readonly Section[] = ['workers'];
const TASK_AND_RUN: readonly Section[] = ['queue', 'workers', 'runs'];
const MAX_RUNS = 8;
const MAX_NODES = 200;
/** Dead workers are shown this long, then forgotten (a supervised one is back well before). */
const FORGET_DEAD_MS = 10 * 60_000;
const MAX_KNOWN = 5000;

/** The sections of the dashboard's state that change on their own (see `Feed`). */
export type Section = 'hub' | 'workers' | 'queue' | 'runs';

/**
 * `tokens`: tokens of the tasks it finished (receipts); `marks`: [epoch ms, tokens finished + pieces
 * streamed so far] at the last samples, so its tokens/s moves while an answer streams, not at its end.
 */
interface Known { entry?: WorkerEntry; row?: WorkerRow; respawns: number; deadSince?: number; tokens: number; marks: [number, number][]; tps: number }

/**
 * Reads the hub's state into the dashboard's sections. Workers that drop out stay listed as dead
 * until they come back (counted as a respawn), since the registry forgets them at once. Follows the
 * store's event stream and tells `changed` which sections a task event touched.
 */
export class Collector {
  private readonly known = new Map<string, Known>();
  private readonly chart: Sample[] = [];
  /** [epoch ms, tokens out] at the last few samples: tokens/s over a few seconds, not one (receipts come in bursts). */
  private readonly tokenMarks: [number, number][] = [];
  private tps = 0;
  private latency = { p50: 0, p99: 0 };
  private readonly reports = new Set<string>();
  /** Text and tokens of finished answers: characters per token, for the streamed estimate. */
  private textChars = 0;
  private textTokens = 0;
  private readonly off: () => void;

  /** Called on every store event with the sections it changed (the feed batches them per tick). */
  changed: (sections: readonly Section[]) => void = () => {};

  constructor(private readonly src: DashSource, private readonly historyLen = 300, private readonly now: () => number = Date.now) {
    this.tokenMarks.push([now(), src.hub.metrics.tokensOut + this.streamed(src.hub.registry.all())]);
    const offStore = src.hub.store.subscribe((e) => this.event(e));
    const offWorkers = src.hub.registry.subscribe(() => this.changed(WORKERS));
    this.off = () => { offStore(); offWorkers(); };
  }

  close(): void { this.off(); }

  private event(e: StoreEvent): void {
    if (e.type === 'evicted') { this.changed(TASK_ONLY); return; }
    if (e.type === 'done' || e.type === 'failed') this.finished(e.rec);
    // A lease or a result changes the counts, the worker holding it, and its run's node if it has one.
    this.changed(e.rec.id.includes(':') && this.src.runs() ? TASK_AND_RUN : TASK_ONLY);
  }

  private finished(rec: TaskRecord): void {
    const r = rec.result;
    if (!r?.worker) return;
    const tokens = r.receipt?.tokens_out ?? 0;
    this.knownOf(r.worker).tokens += tokens;
    if (tokens > 0 && r.text) { this.textChars += r.text.length; this.textTokens += tokens; }
  }

  private knownOf(id: string): Known {
    let k = this.known.get(id);
    if (!k) {
      if (this.known.size >= MAX_KNOWN) this.known.delete(this.known.keys().next().value!);
      k = { respawns: 0, tokens: 0, marks: [], tps: 0 };
      this.known.set(id, k);
    }
    return k;
  }

  /** Take one chart sample (once a second); returns it. */
  sample(): Sample {
    const h = this.src.hub, c = h.store.queue.counts(), now = this.now();
    // Tokens finished plus those streaming now: the figure moves while answers stream.
    const tokens = h.metrics.tokensOut + this.streamed(h.registry.all());
    this.tps = rate(this.tokenMarks, now, tokens);
    for (const w of h.registry.all()) {
      const k = this.knownOf(w.id);
      k.tps = rate(k.marks, now, k.tokens + this.streamed([w]));
    }
    // Quantiles sort a reservoir: once a second, not on every message.
    this.latency = { p50: h.metrics.dispatchLatency.quantile(0.5), p99: h.metrics.dispatchLatency.quantile(0.99) };
    const s: Sample = [Math.round(now / 1000), c.queued, c.leased, c.done, c.failed, Math.round(this.tps * 10) / 10];
    this.chart.push(s);
    if (this.chart.length > this.historyLen) this.chart.shift();
    return s;
  }

  hubView(): HubView {
    const h = this.src.hub;
    return { name: h.name, pid: process.pid, mode: h.failover.mode, coordinator: h.name, started_at: h.startedAt, address: h.address, supervised: this.src.supervised() };
  }

  queue(): QueueView {
    const h = this.src.hub;
    return {
      ...h.store.queue.counts(), dispatch_p50_ms: round(this.latency.p50, 3), dispatch_p99_ms: round(this.latency.p99, 3),
      tps: Math.round(this.tps * 10) / 10, submitted: h.metrics.submitted,
    };
  }

  workers(): WorkerRow[] {
    const now = this.now();
    const supervised = this.src.supervised() > 0;
    const seen = new Set<string>();
    for (const w of this.src.hub.registry.all()) {
      seen.add(w.id);
      const k = this.knownOf(w.id);
      // Back after dropping out, or a new connection in place of the one we saw (missed between reads).
      if (k.deadSince !== undefined || (k.entry && k.entry !== w)) k.respawns++;
      k.deadSince = undefined;
      k.entry = w;
      k.row = {
        // The hub's own view (idle/busy from its leases), not the worker's last heartbeat, which lags.
        id: w.id, state: w.status, agent_state: w.state, role: w.role, ...(w.pendingRole ? { role_pending: w.pendingRole.role } : {}), driver: w.driver,
        host: hostOf(w), ...(w.pid !== undefined ? { pid: w.pid } : {}), tasks: [...w.inflight.keys()], slots: w.slots,
        tps: Math.round(k.tps * 10) / 10, done: w.done, last_seen: Math.round(w.lastSeen / 1000) * 1000,
        respawns: k.respawns, supervised,
      };
    }
    const rows: WorkerRow[] = [];
    for (const [id, k] of this.known) {
      if (!k.row) continue;
      if (!seen.has(id)) {
        k.deadSince ??= now;
        k.entry = undefined;
        if (now - k.deadSince > FORGET_DEAD_MS) { this.known.delete(id); continue; }
        rows.push({ ...k.row, state: 'dead', tasks: [], tps: 0, dead_since: k.deadSince, supervised });
      } else rows.push(k.row);
    }
    return rows.sort((a, b) => natural.compare(a.id, b.id));
  }

  runs(): RunRow[] {
    const rm = this.src.runs();
    if (!rm) return [];
    const live = rm.live();
    const running = live.filter((r) => r.view.state === 'running');
    const ended = live.filter((r) => r.view.state !== 'running').slice(-Math.max(0, MAX_RUNS - running.length));
    // Running runs first, then finished ones; newest first within each.
    return [...running.reverse(), ...ended.reverse()].slice(0, MAX_RUNS).map(({ view, nodes }) => {
      const p = view.progress;
      const rows: NodeRow[] = [];
      for (const n of nodes.values()) {
        if (rows.length >= MAX_NODES) break;
        const task = `${view.run}:${n.node.replaceAll('/', ':')}`;
        let state: string = n.state;
        if (state === 'running') state = this.src.hub.store.queue.get(task)?.state === 'leased' ? 'running' : 'queued';
        rows.push({
          node: n.node, role: n.role, after: n.after, state, task,
          ...(n.worker ? { worker: n.worker } : {}), ...(n.verdict ? { verdict: n.verdict } : {}),
          ...(n.duration_ms !== undefined ? { ms: Math.round(n.duration_ms) } : {}),
        });
      }
      return {
        run: view.run, experiment: view.experiment, topology: view.topology, state: view.state,
        ...(view.outcome?.verdict ? { verdict: view.outcome.verdict } : {}), ...(view.outcome?.reason ? { reason: view.outcome.reason } : {}),
        submitted: p?.submitted ?? 0, done: p?.done ?? 0, failed: p?.failed ?? 0, running: p?.running ?? 0,
        tokens_out: p?.tokens_out ?? 0, tokens_per_s: round(p?.tokens_per_s ?? 0, 1), elapsed_ms: Math.round(p?.elapsed_ms ?? 0),
        nodes: rows, more: Math.max(0, nodes.size - rows.length),
        ...(view.state === 'done' && this.hasReport(view.run, view.dir) ? { report: `/dashboard/report/${encodeURIComponent(view.run)}` } : {}),
      };
    });
  }

  /** Where a run's folder is, for its report (runs this hub drives only). */
  runDir(run: string): string | undefined {
    return this.src.runs()?.live().find((r) => r.view.run === run)?.view.dir;
  }

  private hasReport(run: string, dir: string): boolean {
    if (this.reports.has(run)) return true;
    if (!fs.existsSync(path.join(dir, 'report.html'))) return false;
    this.reports.add(run);
    return true;
  }

  /** A dashboard view opened (+1) or closed (-1): while any is open, workers send partial answers. */
  watch(d: 1 | -1): void { this.src.hub.watchers = Math.max(0, this.src.hub.watchers + d); }

  /**
   * Tokens the tasks these workers hold have streamed so far, estimated from their text: partial
   * answers come in pieces of any size (a few a second), and only the final receipt counts tokens.
   * Characters per token as finished answers had them (4 until one has finished).
   */
  private streamed(workers: Iterable<WorkerEntry>): number {
    let chars = 0;
    for (const w of workers) for (const f of w.inflight.values()) chars += f.answer.chars;
    return chars === 0 ? 0 : chars / (this.textTokens > 0 ? this.textChars / this.textTokens : 4);
  }

  /** The chart so far. */
  history(): Sample[] { return this.chart; }

  task(id: string): TaskRecord | undefined { return this.src.hub.store.queue.get(id); }

  /** The answer a leased task is streaming, if its worker holds it. */
  answer(rec: TaskRecord): Answer | undefined {
    return rec.state === 'leased' && rec.worker ? this.src.hub.registry.get(rec.worker)?.inflight.get(rec.id)?.answer : undefined;
  }

  state(): DashState {
    return { hub: this.hubView(), workers: this.workers(), queue: this.queue(), history: [...this.chart], runs: this.runs() };
  }
}


/** Per second over the marks kept (the last TPS_SAMPLES samples); adds [now, total] to them. */
function rate(marks: [number, number][], now: number, total: number): number {
  marks.push([now, total]);
  if (marks.length > TPS_SAMPLES + 1) marks.shift();
  const [t0, n0] = marks[0]!;
  // A retried task's streamed pieces vanish without a receipt: never a negative rate.
  return Math.max(0, total - n0) / (Math.max(1, now - t0) / 1000);
}

const natural = new Intl.Collator('en', { numeric: true });
const round = (n: number, d: number): number => (Number.isFinite(n) ? Math.round(n * 10 ** d) / 10 ** d : 0);

function hostOf(w: WorkerEntry): string {
  const a = w.conn.socket.remoteAddress ?? '';
  return a === '127.0.0.1' || a === '::1' || a === '::ffff:127.0.0.1' ? 'local' : a.replace(/^::ffff:/, '');
}
