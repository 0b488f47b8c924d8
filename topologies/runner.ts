import { nodeSeed } from './seed.js';
import { topology } from './registry.js';
import { experimentTopology } from './experiment/conditions.js';
import { finishExperiment } from './experiment/finalize.js';
import type { NodeResult, NodeTask, RunDone, RunSpec, Topology } from './types.js';

/** A task as the runner submits it; structurally a hub TaskInput (hub/task.ts). */
export interface TaskRequest {
  id: string;
  prompt: string;
  caps?: string[];
  max_tokens?: number;
  temperature?: number;
  seed?: number;
  json_schema?: Record<string, unknown>;
  timeout_ms?: number;
  max_attempts?: number;
  meta: { run: string; node: string; role: string };
}

/** What the executor knows right after accepting a task: its result, if it already has one. */
export interface SubmitOutcome { id: string; result?: NodeResult }

/** Where tasks run. The hub adapter is hub/runs.ts; tests use an in-memory fake. */
export interface Executor {
  /** Accept tasks (idempotent by id); a task that already finished comes back with its result. */
  submit(tasks: TaskRequest[]): Promise<SubmitOutcome[]>;
  /** Called once per task when it finishes. Returns an unsubscribe function. */
  onFinal(cb: (id: string, result: NodeResult) => void): () => void;
  /** Cancel tasks that have not finished (a cancelled run); optional. */
  cancel?(ids: string[], reason: string): Promise<unknown>;
}

/** Observes a run (the run folder writer, progress printers). Must not throw. */
export interface RunSink {
  submitted?(task: NodeTask, req: TaskRequest, at: number): void;
  finished?(node: string, result: NodeResult, at: number): void;
  done?(outcome: RunOutcome): void;
}

export interface Progress {
  run: string;
  state: 'running' | 'done';
  submitted: number;
  done: number;
  failed: number;
  /** Nodes submitted and not finished; 0 once the run is cancelled (they are counted as `cancelled`). */
  running: number;
  /** Nodes still outstanding when the run was cancelled (their tasks fail with SWARM_ERR_CANCELLED). Absent in folders of older runs. */
  cancelled?: number;
  tokens_out: number;
  tokens_per_s: number;
  elapsed_ms: number;
}

export interface RunOutcome extends RunDone {
  run: string;
  progress: Progress;
}

export interface RunnerOptions {
  runId: string;
  spec: RunSpec;
  executor: Executor;
  sink?: RunSink;
  now?: () => number;
}

/** Task id of a node: ids may not hold "/", so node path separators become ":". */
export function taskId(runId: string, node: string): string {
  return `${runId}:${node.replaceAll('/', ':')}`;
}

/**
 * Drives a topology: asks it for the next step, submits new nodes, feeds results back, until the
 * topology says done. Holds no state that results cannot rebuild: a new Runner with the same run id
 * resumes a run (resubmission is idempotent; finished nodes come back with their results).
 */
export class Runner {
  readonly results = new Map<string, NodeResult>();
  private readonly submitted = new Map<string, NodeTask>();
  private readonly byId = new Map<string, string>();
  private readonly topo: Pick<Topology, 'next'>;
  private readonly now: () => number;
  private readonly startedAt: number;
  private scheduled = false;
  private busy = false;
  /** Something changed while a step ran: step again. */
  private pending = false;
  private outcome?: RunOutcome;
  private resolve!: (o: RunOutcome) => void;
  private readonly finished: Promise<RunOutcome>;
  private off?: () => void;
  private timer?: NodeJS.Timeout;
  private tokensOut = 0;
  private failed = 0;
  /** Submitted nodes without a result. */
  private inflight = 0;
  private retryTimer?: NodeJS.Timeout;
  /** Set once the run is cancelled: a submit still in flight then is cancelled when it returns. */
  private cancelReason?: string;
  /** Nodes outstanding when the run was cancelled. */
  private cancelledNodes = 0;

  constructor(private readonly o: RunnerOptions) {
    // A dataset runs the topology (and its baselines) once per item, then scores the answers.
    this.topo = o.spec.inputs.dataset ? experimentTopology : topology(o.spec.experiment.topology);
    this.now = o.now ?? Date.now;
    this.startedAt = this.now();
    this.finished = new Promise((r) => (this.resolve = r));
  }

  get runId(): string { return this.o.runId; }

  /** Start (or resume) the run; resolves when it ends. */
  run(): Promise<RunOutcome> {
    if (!this.off) {
      this.off = this.o.executor.onFinal((id, r) => {
        const node = this.byId.get(id);
        if (node !== undefined) this.record(node, r);
      });
      const limit = this.o.spec.experiment.limits.run_timeout_ms;
      if (limit > 0) { this.timer = setTimeout(() => this.end({ output: '', verdict: 'aborted', reason: `run timeout (${limit} ms)` }), limit); this.timer.unref?.(); }
      this.schedule();
    }
    return this.finished;
  }

  /** Stop driving the run now; tasks already submitted still run on the swarm. */
  abort(reason: string): void { this.end({ output: '', verdict: 'aborted', reason }); }

  /**
   * Cancel the run: no node is submitted from now on, the run ends with verdict `cancelled`, and
   * the executor cancels the tasks submitted and not finished. Resolves with their ids (none if the
   * run had already ended).
   */
  async cancel(reason: string): Promise<string[]> {
    if (this.outcome) return [];
    const outstanding = this.outstanding();
    this.cancelReason = reason;
    this.cancelledNodes = outstanding.length;
    this.end({ output: '', verdict: 'cancelled', reason, details: { cancelled_nodes: outstanding.length } });
    await this.o.executor.cancel?.(outstanding, reason);
    return outstanding;
  }

  /** Task ids submitted and not finished. */
  outstanding(): string[] {
    return [...this.byId].filter(([, node]) => !this.results.has(node)).map(([id]) => id);
  }

  /** True once the run has ended. */
  get ended(): boolean { return this.outcome !== undefined; }

  progress(): Progress {
    const elapsed = this.now() - this.startedAt;
    const done = this.results.size;
    return {
      run: this.o.runId, state: this.outcome ? 'done' : 'running', submitted: this.submitted.size, done, failed: this.failed,
      // A cancelled run's outstanding nodes are not running any more, whatever their tasks still do.
      running: this.cancelReason !== undefined ? 0 : this.inflight, cancelled: this.cancelledNodes,
      tokens_out: this.tokensOut, tokens_per_s: elapsed > 0 ? (this.tokensOut * 1000) / elapsed : 0, elapsed_ms: elapsed,
    };
  }

  private record(node: string, r: NodeResult): void {
    if (this.results.has(node) || this.outcome) return;
    this.results.set(node, r);
    if (this.submitted.has(node)) this.inflight--;
    if (!r.ok) this.failed++;
    this.tokensOut += r.receipt?.tokens_out ?? 0;
    this.o.sink?.finished?.(node, r, this.now());
    this.schedule();
  }

  /** Batch results that arrive together into one call of `next`. */
  private schedule(): void {
    if (this.scheduled || this.outcome) return;
    this.scheduled = true;
    setImmediate(() => { this.scheduled = false; void this.advance(); });
  }

  private async advance(): Promise<void> {
    if (this.busy || this.outcome) { if (this.busy) this.pending = true; return; }
    this.busy = true;
    try {
      do {
        this.pending = false;
        await this.step();
      } while (this.pending && !this.outcome);
    } catch (err) {
      this.end({ output: '', verdict: 'failed', reason: `runner error: ${(err as Error).message}` });
    } finally {
      this.busy = false;
    }
  }

  private async step(): Promise<void> {
    const spec = this.o.spec;
    const step = this.topo.next(spec, this.results, this.submitted);
    if (step.done) { this.end(spec.inputs.dataset ? await finishExperiment(spec, step.done, this.results) : step.done); return; }
    let fresh = step.tasks.filter((t) => !this.submitted.has(t.node));
    if (fresh.length === 0) {
      if (this.inflight === 0 && !this.retryTimer) this.end({ output: '', verdict: 'failed', reason: 'the topology stalled: no task ready and none running' });
      return;
    }
    const { max_nodes: max, max_inflight: window } = spec.experiment.limits;
    if (this.submitted.size + fresh.length > max) { this.end({ output: '', verdict: 'aborted', reason: `node bound: the run would pass limits.max_nodes (${max})` }); return; }
    if (this.inflight >= window) return;
    fresh = fresh.slice(0, window - this.inflight);
    const reqs = fresh.map((t) => this.request(t));
    for (let i = 0; i < fresh.length; i++) {
      this.submitted.set(fresh[i]!.node, fresh[i]!);
      this.byId.set(reqs[i]!.id, fresh[i]!.node);
    }
    this.inflight += fresh.length;
    let outcomes: SubmitOutcome[];
    try {
      outcomes = await this.o.executor.submit(reqs);
    } catch (err) {
      // A full queue is back-pressure, not a failure: take the nodes back and try again shortly.
      if ((err as { code?: string }).code !== 'SWARM_ERR_QUEUE_FULL') throw err;
      for (let i = 0; i < fresh.length; i++) { this.submitted.delete(fresh[i]!.node); this.byId.delete(reqs[i]!.id); }
      this.inflight -= fresh.length;
      this.retryTimer ??= setTimeout(() => { this.retryTimer = undefined; this.schedule(); }, 250);
      return;
    }
    if (this.cancelReason !== undefined) { await this.o.executor.cancel?.(reqs.map((r) => r.id), this.cancelReason); return; }
    const at = this.now();
    for (let i = 0; i < fresh.length; i++) this.o.sink?.submitted?.(fresh[i]!, reqs[i]!, at);
    for (const out of outcomes) {
      const node = this.byId.get(out.id);
      if (node !== undefined && out.result) this.record(node, out.result);
    }
    this.pending = true;
  }

  private request(t: NodeTask): TaskRequest {
    const e = this.o.spec.experiment;
    const role = e.roles[t.role];
    return {
      id: taskId(this.o.runId, t.node),
      prompt: t.prompt,
      ...(role?.caps ? { caps: role.caps } : {}),
      max_tokens: role?.max_tokens ?? e.limits.max_tokens,
      temperature: t.temperature ?? role?.temperature ?? e.temperature,
      seed: nodeSeed(e.seed, t.node),
      ...(t.json_schema ? { json_schema: t.json_schema } : {}),
      timeout_ms: e.limits.timeout_ms,
      max_attempts: e.limits.max_attempts,
      meta: { run: this.o.runId, node: t.node, role: t.role },
    };
  }

  private end(d: RunDone): void {
    if (this.outcome) return;
    if (this.timer) clearTimeout(this.timer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.off?.();
    this.outcome = { ...d, run: this.o.runId, progress: { ...this.progress(), state: 'done' } };
    this.o.sink?.done?.(this.outcome);
    this.resolve(this.outcome);
  }
}
