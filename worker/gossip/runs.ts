import type { Logger } from 'pino';
import type { Executor, NodeResult, RunOutcome, RunSpec, SubmitOutcome, TaskRequest } from '../../topologies/index.js';
import type { Entry, Replica, ReplicaSpec } from './replica.js';

/** A topology run as the hub replicates it (STATE `runs`): its spec while it runs, `ended` once over. */
export interface ReplicatedRun { run: string; spec?: unknown; ended?: boolean }

/** A replica entry as a topology node result; undefined while not final, or if its text was not replicated. */
export function entryResult(e: Entry | undefined): NodeResult | undefined {
  if (!e) return undefined;
  if (e.result) return typeof e.result.text === 'string' ? { ok: true, text: e.result.text, receipt: e.result.receipt as NodeResult['receipt'], worker: e.result.worker } : undefined;
  if (e.failure) return { ok: false, text: '', error: e.failure.error ?? { code: 'SWARM_ERR_TASK_FAILED', msg: 'failed' }, worker: e.failure.worker };
  return undefined;
}

/**
 * The topology runner's executor in gossip mode: a task is an entry in the replica (so the acting
 * coordinator dispatches it and gossip spreads it), a node result is the entry's outcome. Task ids
 * are the run's node ids, so a task the hub already had, or another coordinator submitted, is the
 * same entry: submitting is idempotent, and a finished one comes back with its result.
 */
export class ReplicaExecutor implements Executor {
  constructor(private readonly replica: Replica) {}

  async submit(tasks: TaskRequest[]): Promise<SubmitOutcome[]> {
    const fresh: ReplicaSpec[] = [];
    const out = tasks.map((t): SubmitOutcome => {
      const e = this.replica.get(t.id);
      const result = entryResult(e);
      if (result) return { id: t.id, result };
      // A task the hub sends back on its return (HANDBACK submits unknown specs): a hub TaskInput.
      if (!e?.spec) fresh.push({ ...t });
      return { id: t.id };
    });
    if (fresh.length) this.replica.addTasks(fresh);
    return out;
  }

  onFinal(cb: (id: string, r: NodeResult) => void): () => void {
    return this.replica.onChange((e) => {
      const r = entryResult(e);
      if (r) cb(e.id, r);
    });
  }
}

/**
 * Topology runs in gossip mode ("it continues the run's topology from the replicated
 * state"). The hub sends the holders each run's spec; the acting coordinator (a holder, being the
 * lowest live id) drives every run not ended with a topology Runner over the replica, so a
 * map-reduce whose hub died still gets its reduce. It holds no state of its own: a coordinator that
 * takes over later starts a Runner from the same spec and results, and so does the hub that comes
 * back (its journal has the run; the results come in the handback). Stepping down stops the Runner;
 * the tasks it submitted stay in the replica and run on.
 *
 * Limits: a run whose spec never reached a live member (the hub and all holders died together)
 * waits for a hub; so does a node whose input result was too large to replicate (text left out).
 */
export class GossipRuns {
  private readonly specs = new Map<string, RunSpec>();
  private readonly ended = new Set<string>();
  private readonly hubEnded = new Set<string>();
  private readonly driving = new Map<string, { abort(reason: string): void } | null>();
  private coordinating = false;
  /** Outcomes of runs this member drove to their end in gossip mode (for status and tests). */
  readonly outcomes = new Map<string, Pick<RunOutcome, 'verdict' | 'output'>>();

  constructor(private readonly replica: Replica, private readonly log?: Logger) {}

  /** Runs known and not ended. */
  get active(): string[] { return [...this.specs.keys()]; }
  /** The last runs the hub said ended (at most 20, newest last). */
  get endedOnHub(): string[] { return [...this.hubEnded]; }
  /** Runs this member drives now. */
  get drivingCount(): number { return [...this.driving.values()].filter(Boolean).length; }

  /** Runs from the hub (STATE frames). A malformed item is skipped. */
  merge(list: ReplicatedRun[]): void {
    for (const r of list) {
      if (!r || typeof r.run !== 'string') continue;
      if (r.ended) {
        this.ended.add(r.run);
        this.hubEnded.add(r.run);
        if (this.hubEnded.size > 20) this.hubEnded.delete(this.hubEnded.values().next().value!);
        this.specs.delete(r.run);
        this.stop(r.run, 'the run ended on the hub');
      } else if (r.spec && typeof r.spec === 'object' && !this.ended.has(r.run)) {
        this.specs.set(r.run, r.spec as RunSpec);
        if (this.coordinating) void this.drive(r.run);
      }
    }
  }

  /** This member became, or stopped being, the acting coordinator. */
  setCoordinating(on: boolean): void {
    this.coordinating = on;
    if (on) for (const run of this.specs.keys()) void this.drive(run);
    else for (const run of [...this.driving.keys()]) this.stop(run, 'stepped down');
  }

  stopAll(): void { this.setCoordinating(false); }

  private stop(run: string, reason: string): void {
    const d = this.driving.get(run);
    this.driving.delete(run);
    d?.abort(reason);
  }

  private async drive(run: string): Promise<void> {
    if (this.driving.has(run)) return;
    this.driving.set(run, null);
    try {
      // Loaded only here: a worker that never coordinates a run never loads the topologies.
      const { Runner } = await import('../../topologies/index.js');
      const spec = this.specs.get(run);
      if (!spec || !this.coordinating || this.driving.get(run) !== null) { if (this.driving.get(run) === null) this.driving.delete(run); return; }
      const runner = new Runner({ runId: run, spec, executor: new ReplicaExecutor(this.replica) });
      this.driving.set(run, runner);
      this.log?.info({ run }, 'driving the run in gossip mode');
      const outcome = await runner.run();
      if (this.driving.get(run) !== runner) return; // stopped: not an outcome
      this.driving.delete(run);
      this.specs.delete(run);
      this.ended.add(run);
      this.outcomes.set(run, { verdict: outcome.verdict, output: outcome.output });
      this.log?.info({ run, verdict: outcome.verdict, reason: outcome.reason }, 'run finished in gossip mode (the hub records it on its return)');
    } catch (err) {
      this.driving.delete(run);
      this.log?.warn({ err, run }, 'driving the run failed; it waits for a hub');
    }
  }
}
