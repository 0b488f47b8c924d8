import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { SwarmError, randomId } from '../protocol/index.js';
import {
  ExperimentError, Runner, parseExperiment, resolveInputs,
  type Executor, type NodeResult, type Progress, type RunOutcome, type RunSpec, type SubmitOutcome, type TaskRequest,
} from '../topologies/index.js';
import { RunFolder } from '../topologies/artifacts.js';
import { makePassport } from '../topologies/passport.js';
import { passportFields, runningEngines } from '../drivers/batched/engine-info.js';
import type { NodeRecord } from '../topologies/report.js';
import type { Hub } from './hub.js';
import { isFinal, type TaskRecord } from './task.js';

/** A hub task record as a topology node result. */
export function nodeResult(rec: TaskRecord): NodeResult {
  return rec.state === 'done'
    ? { ok: true, text: rec.result?.text ?? '', receipt: rec.result?.receipt, worker: rec.result?.worker }
    : { ok: false, text: '', error: rec.error ?? { code: 'SWARM_ERR_TASK_FAILED', msg: 'failed' }, worker: rec.worker };
}

/** The runner's executor on a hub: tasks are journaled hub tasks; resubmission is idempotent by id. */
export class HubExecutor implements Executor {
  constructor(private readonly hub: Hub) {}

  async submit(tasks: TaskRequest[]): Promise<SubmitOutcome[]> {
    const out = await this.hub.submit(tasks);
    return out.map((o) => ({ id: o.record.id, ...(isFinal(o.record) ? { result: nodeResult(o.record) } : {}) }));
  }

  onFinal(cb: (id: string, r: NodeResult) => void): () => void {
    return this.hub.store.onChange((rec) => { if (isFinal(rec)) cb(rec.id, nodeResult(rec)); });
  }

  cancel(ids: string[], reason: string): Promise<{ cancelled: string[]; running: number }> { return this.hub.cancel(ids, reason); }
}

/** What POST /runs takes: an experiment (object or YAML/JSON text) and optionally its resolved inputs. */
export interface StartRun {
  experiment: unknown;
  inputs?: RunSpec['inputs'];
  /** Where relative input and model paths are resolved (the experiment file's folder). */
  base_dir?: string;
  /** `--set key=value` overrides. */
  set?: string[];
  replay_of?: string;
  /** Defaults for the passport when roles name no driver/model (the swarm's own). */
  driver?: string;
  model?: string;
  /** The driver options the run's workers were started with (`--driver-opt`), for the passport. */
  driver_options?: Record<string, string>;
}

export interface RunView { run: string; state: 'running' | 'done'; experiment: string; topology: string; progress?: Progress; outcome?: Omit<RunOutcome, 'progress'>; dir: string }

interface Active { runner: Runner; folder: RunFolder; spec: RunSpec; done: Promise<RunOutcome> }

export interface RunManagerOptions {
  /** The runs folder (`<state-dir>/runs`). */
  dir: string;
  version: string;
  log: Logger;
  /** How this swarm runs its model (batched, per-worker, shared): the passport names it. */
  engine?: () => string | undefined;
}

/**
 * Runs on the hub: starts topology runners, journals each run's spec (a `run` meta record) so a
 * restarted hub resumes it from the spec plus the results already in the store, and writes the
 * run folder.
 */
export class RunManager {
  private readonly active = new Map<string, Active>();
  private readonly executor: HubExecutor;

  constructor(private readonly hub: Hub, private readonly o: RunManagerOptions) {
    this.executor = new HubExecutor(hub);
  }

  /** Validate and start a run; resolves with its id once its spec is journaled. No run starts on a bad experiment. */
  async start(body: StartRun): Promise<{ run: string; dir: string }> {
    const text = typeof body.experiment === 'string' ? body.experiment : JSON.stringify(body.experiment ?? null);
    const experiment = parseExperiment(text, { source: 'experiment', set: body.set });
    const baseDir = body.base_dir ?? process.cwd();
    const inputs = body.inputs ?? resolveInputs(experiment, baseDir);
    const spec: RunSpec = { experiment, inputs };
    const run = newRunId();
    const passport = await makePassport({
      run, experiment, swarmVersion: this.o.version, baseDir, defaultDriver: body.driver, defaultModel: body.model, driverOptions: body.driver_options,
      replayOf: body.replay_of, engines: { ...((mode): Record<string, string> => (mode ? { swarm_engine: mode } : {}))(this.o.engine?.()), ...this.resolvedEngines() },
    });
    await this.hub.store.appendMeta('run', { run, spec, passport });
    await this.launch(run, spec, passport, false);
    return { run, dir: path.join(this.o.dir, run) };
  }

  /** What the swarm's batched engines resolved at start (flash attention and why), read from the state dir. */
  private resolvedEngines(): Record<string, string> {
    return this.hub.config.stateDir ? passportFields(runningEngines(this.hub.config.stateDir)) : {};
  }

  /** Resume every journaled run that has no `run_done` record (after a hub restart). */
  async resumeAll(): Promise<string[]> {
    const finished = new Set(this.hub.store.meta.filter((m) => m.kind === 'run_done').map((m) => (m.data as { run: string }).run));
    const resumed: string[] = [];
    for (const m of this.hub.store.meta) {
      if (m.kind !== 'run') continue;
      const d = m.data as { run: string; spec: RunSpec; passport: Awaited<ReturnType<typeof makePassport>> };
      if (finished.has(d.run) || this.active.has(d.run)) continue;
      await this.launch(d.run, d.spec, d.passport, true);
      resumed.push(d.run);
    }
    if (resumed.length) this.o.log.info({ runs: resumed }, 'runs resumed from the journal');
    return resumed;
  }

  private async launch(run: string, spec: RunSpec, passport: Awaited<ReturnType<typeof makePassport>>, resumed: boolean): Promise<void> {
    const folder = await RunFolder.open(path.join(this.o.dir, run), spec, passport, resumed);
    const runner = new Runner({ runId: run, spec, executor: this.executor, sink: folder });
    this.hub.failover.runChanged(run, spec);
    const done = runner.run().then(async (outcome) => {
      this.hub.failover.runChanged(run, undefined, true);
      await folder.close();
      await this.hub.store.appendMeta('run_done', { run, verdict: outcome.verdict }).catch(() => {});
      this.o.log.info({ run, verdict: outcome.verdict, reason: outcome.reason }, 'run finished');
      return outcome;
    });
    this.active.set(run, { runner, folder, spec, done });
  }

  /**
   * Cancel a running run: it issues no more nodes, its outstanding tasks are cancelled on the hub
   * and their workers, and it ends with verdict `cancelled` and the reason (events.jsonl, report,
   * result.json). A run that has already ended is left as it is (`cancelled: false`).
   */
  async cancel(run: string, reason = 'cancelled by operator'): Promise<RunView & { cancelled: boolean; tasks_cancelled?: number }> {
    const a = this.active.get(run);
    if (!a || a.runner.ended) {
      const v = this.get(run);
      if (!v) throw new SwarmError('SWARM_ERR_UNKNOWN_RUN', `no run ${run}`);
      if (v.state === 'running') throw new SwarmError('SWARM_ERR_CONFIG', `run ${run} is not driven by this hub (its folder has no result); it cannot be cancelled here`);
      return { ...v, cancelled: false };
    }
    a.folder.event({ type: 'run_cancelled', reason, outstanding: a.runner.outstanding().length });
    const ids = await a.runner.cancel(reason);
    this.o.log.info({ run, reason, tasks: ids.length }, 'run cancelled');
    await a.done;
    return { ...this.get(run)!, cancelled: true, tasks_cancelled: ids.length };
  }

  /** Runs started or resumed by this hub, oldest first, with their nodes so far (for live views). */
  live(): { view: RunView; nodes: ReadonlyMap<string, NodeRecord> }[] {
    return [...this.active].map(([run, a]) => ({ view: this.get(run)!, nodes: a.folder.nodes }));
  }

  /** Wait for a run started here to end. */
  wait(run: string): Promise<RunOutcome> | undefined { return this.active.get(run)?.done; }

  /** A run's progress (live) or outcome (from its folder). */
  get(run: string): RunView | undefined {
    const a = this.active.get(run);
    if (a) {
      const outcome = a.folder.outcome;
      return {
        run, state: outcome ? 'done' : 'running', experiment: a.spec.experiment.name, topology: a.spec.experiment.topology,
        progress: outcome?.progress ?? a.runner.progress(), ...(outcome ? { outcome: strip(outcome) } : {}), dir: a.folder.dir,
      };
    }
    return readRun(path.join(this.o.dir, run));
  }

  /** Runs known here, newest first. */
  list(): RunView[] {
    let names: string[] = [];
    try { names = fs.readdirSync(this.o.dir); } catch { return []; }
    return names.sort().reverse().flatMap((n) => { const v = this.get(n); return v ? [v] : []; });
  }

  /** Wait for report writes of finished runs (hub shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.active.values()].map((a) => (a.folder.outcome ? a.folder.close() : Promise.resolve())));
  }
}

function strip(o: RunOutcome): Omit<RunOutcome, 'progress'> {
  const { progress: _p, ...rest } = o;
  return rest;
}

/** A run as its folder records it (for runs finished before this hub started). */
export function readRun(dir: string): RunView | undefined {
  try {
    const passport = JSON.parse(fs.readFileSync(path.join(dir, 'passport.json'), 'utf8')) as { run: string; experiment: string; topology: string };
    let result: (RunOutcome & { metrics?: unknown }) | undefined;
    try { result = JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8')) as RunOutcome; } catch { /* still running */ }
    return {
      run: passport.run, state: result ? 'done' : 'running', experiment: passport.experiment, topology: passport.topology,
      ...(result ? { progress: result.progress, outcome: strip(result) } : {}), dir,
    };
  } catch { return undefined; }
}

/** Sortable, readable, unique: `20261122-171512-k3x9`. */
export function newRunId(): string {
  const d = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${d}-${randomId().slice(0, 4)}`;
}

let version: string | undefined;
/** This package's version, from the package.json above this file (in the source tree or dist/). */
export function swarmVersion(): string {
  if (version) return version;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++, dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'mittelo-swarm' && pkg.version) return (version = pkg.version);
    } catch { /* keep looking */ }
  }
  return (version = 'unknown');
}

export { ExperimentError, SwarmError };
