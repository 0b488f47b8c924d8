import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { alive } from '../../hub/supervisor.js';
import { loadExperiment, resolveInputs, type Experiment, type RunSpec } from '../../topologies/index.js';
import { Exit, fail } from '../exit.js';
import { call, remoteTarget, type ControlTarget, type RemoteOptions } from '../http.js';
import { int, keyValue } from '../options.js';
import { Progress } from '../progress.js';
import { readHubFile, stateDir, type HubFile } from '../state.js';
import { chooseModel } from '../model.js';
import { printExperiment } from './experiment-print.js';
import { compareRuns, readRunDir, resolveRunId } from './runs.js';
import { checkEngine, planPools, routeRoles, startPools, workerCaps, type Pool } from './run-pools.js';
import { startProcess } from '../../drivers/lifecycle.js';
import { pemFile } from '../file-option.js';

export interface RunView {
  run: string; state: 'running' | 'done'; experiment: string; topology: string; dir: string;
  progress?: { submitted: number; done: number; failed: number; running: number; cancelled?: number; tokens_out: number; tokens_per_s: number; elapsed_ms: number };
  outcome?: { output: string; verdict?: string; reason?: string; details?: Record<string, unknown> };
}

export interface RunOptions {
  agents?: number; repeat: number; set: string[]; json: boolean; replay?: string; stateDir?: string;
  timeout: number; driver?: string; model?: string; driverOpt: Record<string, string>;
}

const CLI = fileURLToPath(new URL('../main.js', import.meta.url));
const collect = (v: string, prev: string[] = []) => [...prev, v];

export function registerRun(program: Command): void {
  program.command('run')
    .description('run an experiment (a topology over the swarm) and write its run folder')
    .argument('[experiment]', 'experiment file (YAML or JSON)')
    .option('-n, --agents <n>', 'agents for a swarm started for this run (default: the sum of agents per role)', int('--agents', 1))
    .option('--repeat <k>', 'run K times with seeds seed, seed+1, …', int('--repeat', 1), 1)
    .option('--set <key=value>', 'override a field (dotted path, repeatable)', collect, [])
    .option('--replay <run>', 're-run a recorded run with the same spec, seed and settings')
    .option('--driver <name>', 'driver for a swarm started for this run (default: the roles\' driver, else echo)')
    .option('--model <path>', 'model for a swarm started for this run, for every role (default: the roles\' model, else the default model of swarm up)')
    .option('--driver-opt <key=value>', 'driver option for a swarm started for this run (repeatable; e.g. p=0.6 for the simulated driver)', keyValue, {})
    .option('--timeout <ms>', 'give up waiting after this long', int('--timeout', 1), 3_600_000)
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--json', 'print JSON', false)
    .option('--hub-url <url>', 'run on a remote swarm\'s control API, https://host:port (env SWARM_HUB_URL)')
    .option('--token <secret>', 'the remote swarm\'s token (env SWARM_TOKEN)')
    .option('--tls-ca <file>', 'CA that signed the remote control API\'s certificate (env SWARM_TLS_CA)', pemFile)
    .action(async (file: string | undefined, o: RunOptions & RemoteOptions) => {
      try {
        const dir = stateDir(o.stateDir);
        const plan = prepare(file, o, dir);
        // A remote swarm is used as it is: nothing is started on another machine from here.
        const remote = remoteTarget(o);
        if (remote && (o.driver || o.model || Object.keys(o.driverOpt).length)) {
          throw new SwarmError('SWARM_ERR_CONFIG', '--driver, --model and --driver-opt choose the engine of a swarm this command starts; a remote swarm runs what it was started with: leave them out');
        }
        const hub = remote ?? await ensureSwarm(dir, plan, o);
        const startedHere = plan.started;
        const views: RunView[] = [];
        for (let i = 0; i < o.repeat; i++) {
          const set = o.repeat > 1 ? [...o.set, `seed=${plan.experiment.seed + i}`] : o.set;
          const { run } = await call<{ run: string }>(hub, 'POST', '/runs', {
            experiment: plan.experiment, inputs: plan.inputs, base_dir: plan.baseDir, set: plan.replayOf ? [] : set,
            replay_of: plan.replayOf, driver: plan.driver, model: plan.model, ...(plan.driverOpt ? { driver_options: plan.driverOpt } : {}),
          }, 120_000);
          views.push(await follow(dir, hub, run, o, remote !== undefined));
          if (views.at(-1)?.outcome?.verdict === 'cancelled') break; // Ctrl-C (or `runs cancel`) stops a --repeat too
        }
        if (o.json) process.stdout.write(JSON.stringify(views.length === 1 ? views[0] : { runs: views }) + '\n');
        else for (const v of views) printView(v);
        if (!o.json && views.length > 1) process.stdout.write(compareRuns(views.map((v) => readRunDir(v.dir)!)) + '\n');
        // A swarm this command started outlives it (the next run reuses it): say so, and how to stop it.
        if (startedHere) process.stderr.write(`note: the swarm this command started is still running (state dir ${dir}); stop it with: swarm down${o.stateDir ? ` --state-dir ${o.stateDir}` : ''}\n`);
        if (views.some((v) => v.state !== 'done')) process.exit(Exit.TIMEOUT);
        if (views.some((v) => v.outcome?.verdict === 'cancelled')) process.exit(Exit.INTERRUPTED);
        if (views.some((v) => v.outcome?.verdict === 'failed')) process.exit(Exit.TASKS_FAILED);
        process.exit(Exit.OK);
      } catch (err) { fail(err, o.json); }
    });
}

export interface Plan {
  experiment: Experiment; inputs?: RunSpec['inputs']; baseDir: string; replayOf?: string; driver?: string; model?: string; pools: Pool[]; started?: boolean;
  /** The driver options the run's workers run with (for the passport), once the swarm is known. */
  driverOpt?: Record<string, string>;
}

/** Validate everything before any swarm starts or any task is submitted. */
export function prepare(file: string | undefined, o: RunOptions, dir: string): Plan {
  if (o.replay) {
    o.replay = resolveRunId(path.join(dir, 'runs'), o.replay);
    const rd = path.join(dir, 'runs', o.replay);
    let spec: RunSpec;
    try { spec = JSON.parse(fs.readFileSync(path.join(rd, 'spec.json'), 'utf8')) as RunSpec; } catch {
      throw new SwarmError('SWARM_ERR_CONFIG', `no recorded run ${o.replay} in ${path.join(dir, 'runs')}`);
    }
    const passport = JSON.parse(fs.readFileSync(path.join(rd, 'passport.json'), 'utf8')) as { models?: { role: string; path: string }[]; drivers?: { driver: string }[] };
    const driver = o.driver ?? passport.drivers?.[0]?.driver, model = o.model ?? passport.models?.[0]?.path;
    const pools = o.driver || o.model ? [onePool(spec.experiment, driver, model, o.agents)]
      : planPools(spec.experiment, (role) => passport.models?.find((m) => m.role === role)?.path, { driver, model }, o.agents);
    return { experiment: spec.experiment, inputs: spec.inputs, baseDir: process.cwd(), replayOf: o.replay, driver, model, pools };
  }
  if (!file) throw new SwarmError('SWARM_ERR_CONFIG', 'give an experiment file, or --replay RUN');
  const baseDir = path.dirname(path.resolve(file));
  let experiment = resolveModels(loadExperiment(file, { set: o.set }), o.set.length ? loadExperimentOrUndefined(file) : undefined, baseDir);
  // --driver/--model replace the roles' own, so the passport and the reports name what ran.
  if (o.driver || o.model) experiment = overrideRoles(experiment, o.driver, o.model);
  checkModels(experiment);
  const inputs = resolveInputs(experiment, baseDir);
  const roles = Object.values(experiment.roles);
  const driver = o.driver ?? roles.find((r) => r.driver)?.driver;
  const model = o.model ? path.resolve(o.model) : roles.find((r) => r.model)?.model;
  // --driver/--model put every role on one pool (a quick run on echo, say); else one pool per (driver, model).
  const pools = o.driver || o.model ? [onePool(experiment, driver, model, o.agents)]
    : planPools(experiment, (role) => experiment.roles[role]?.model, { driver, model }, o.agents);
  // The set overrides are already applied; the hub gets the resolved experiment.
  o.set = [];
  return { experiment, inputs, baseDir, driver, model, pools };
}

/** The experiment file without overrides, or undefined when it does not validate alone. */
export function loadExperimentOrUndefined(file: string): Experiment | undefined {
  try { return loadExperiment(file); } catch { return undefined; }
}

/**
 * Role model paths made absolute: a path written in the experiment file is relative to its folder;
 * one given on the command line (`--set roles.agent.model=…`) to the current directory, like every
 * path a CLI takes. `plain` is the experiment without the --set overrides.
 */
export function resolveModels(e: Experiment, plain: Experiment | undefined, baseDir: string): Experiment {
  const roles = Object.fromEntries(Object.entries(e.roles).map(([k, r]) => {
    if (!r.model) return [k, r];
    const fromFile = plain?.roles[k]?.model === r.model;
    return [k, { ...r, model: path.resolve(fromFile ? baseDir : process.cwd(), r.model) }];
  }));
  return { ...e, roles };
}

/** Every model a role names must exist: a run never falls back to whatever model a swarm has. */
export function checkModels(e: Experiment): void {
  for (const [k, r] of Object.entries(e.roles)) {
    if (r.model && !fs.existsSync(r.model)) throw new SwarmError('SWARM_ERR_CONFIG', `model ${r.model} (roles.${k}.model) does not exist`);
  }
}

/** The experiment with every role on this driver and/or model. */
export function overrideRoles(e: Experiment, driver: string | undefined, model: string | undefined): Experiment {
  const roles = Object.fromEntries(Object.entries(e.roles).map(([k, r]) => [k, { ...r, ...(driver ? { driver } : {}), ...(model ? { model: path.resolve(model) } : {}) }]));
  return { ...e, roles };
}

/** Every role on one pool of this driver and model; its workers have every cap a role asks for. */
function onePool(e: Experiment, driver: string | undefined, model: string | undefined, agents: number | undefined): Pool {
  const roles = Object.values(e.roles);
  const caps = [...new Set(roles.flatMap((r) => r.caps ?? []))];
  return { driver: driver ?? 'echo', model, roles: Object.keys(e.roles), agents: agents ?? Math.max(1, Math.min(64, roles.reduce((s, r) => s + r.agents, 0))), caps };
}

/**
 * The running swarm of the state dir, or a new one sized for the experiment: `swarm up --detach`
 * with the first pool's driver and model, then one worker process per further pool. With more than
 * one pool each role is routed to its pool by a cap (also on a running swarm whose workers have the
 * pools' caps: a swarm an earlier `swarm run` of the experiment started).
 */
export async function ensureSwarm(dir: string, plan: Plan, o: RunOptions): Promise<HubFile> {
  const h = readHubFile(dir);
  const mixed = plan.pools.length > 1;
  if (h && alive(h.pid)) {
    // --driver, --driver-opt and --model are what this run asks to run on: never silently something else.
    const running = await checkEngine(dir, h, o);
    if (running) { plan.driver ??= running.driver; plan.model ??= running.model; plan.driverOpt = { ...running.driver_opt, ...o.driverOpt }; }
    if (o.agents !== undefined && h.agents !== undefined && h.agents !== o.agents && !o.json) {
      process.stderr.write(`note: using the running swarm of ${h.agents} agent(s); --agents only sizes a swarm this command starts\n`);
    }
    if (mixed) {
      const have = await workerCaps(h);
      if (plan.pools.every((p) => have.has(p.cap!))) plan.experiment = routeRoles(plan.experiment, plan.pools);
      else if (!o.json && Object.values(plan.experiment.roles).every((r) => !r.caps)) {
        process.stderr.write('note: roles name more than one driver or model, but the running swarm has no worker pools for them: any worker takes any role. Stop it (swarm down) and `swarm run` starts one pool per model, or give each role caps and start matching workers (swarm worker --caps …).\n');
      }
    }
    return h;
  }
  const [first, ...rest] = plan.pools;
  await chooseModels(plan, o);
  const args = [CLI, 'up', '--detach', '--state-dir', dir, '--agents', String(first!.agents), '--driver', first!.driver];
  if (first!.model) args.push('--model', first!.model);
  for (const [k, v] of Object.entries(o.driverOpt)) args.push('--driver-opt', `${k}=${v}`);
  if (first!.caps.length) args.push('--caps', first!.caps.join(','));
  if (!o.json) process.stderr.write(`no running swarm in ${dir}; starting one: swarm ${args.slice(1).join(' ')}\n`);
  const code = await new Promise<number | null>((resolve) => {
    const c = startProcess(process.execPath, [...process.execArgv, ...args], { stdio: ['ignore', 'ignore', 'inherit'], group: false });
    c.once('exit', (code) => resolve(code));
  });
  const started = readHubFile(dir);
  if (code !== 0 || !started) throw new SwarmError('SWARM_ERR_NO_SWARM', `could not start a swarm (swarm up exited with ${code})`);
  if (rest.length) await startPools(dir, started, rest, { json: o.json });
  plan.experiment = routeRoles(plan.experiment, plan.pools);
  plan.started = true;
  plan.driverOpt = { ...o.driverOpt };
  return started;
}

/** A model-running pool with no model gets swarm up's default, chosen before the swarm starts so the passport (and a sweep's cell keys) can name it. */
export async function chooseModels(plan: Plan, o: Pick<RunOptions, 'json'>): Promise<void> {
  for (const p of plan.pools) {
    if (p.model) continue;
    const chosen = await chooseModel(p.driver, undefined, { quiet: o.json });
    if (chosen.path) { p.model = chosen.path; plan.model ??= chosen.path; }
  }
}

/**
 * Poll the run, drawing a progress line, until it is done or the timeout passes. A hub that goes
 * away (restart, failover) is waited for: the run resumes on the hub that comes back.
 */
export async function follow(dir: string, hub: ControlTarget, run: string, o: RunOptions, remote = false): Promise<RunView> {
  const progress = new Progress(o.json);
  const deadline = Date.now() + o.timeout;
  // Ctrl-C (or SIGTERM) cancels the run on the hub (its outstanding tasks stop on the workers) and we
  // wait for it to end as cancelled, so the run folder is complete; a second one leaves at once.
  let interrupted = false;
  const onInt = (): void => {
    if (interrupted) { progress.done(); process.exit(Exit.INTERRUPTED); }
    interrupted = true;
    progress.update(`run ${run}: cancelling (Ctrl-C again to leave now)…`);
    void call(hub, 'POST', `/runs/${encodeURIComponent(run)}/cancel`, { reason: 'interrupted: Ctrl-C in swarm run' }, 30_000)
      .catch((err: unknown) => { process.stderr.write(`swarm: could not cancel run ${run}: ${err instanceof Error ? err.message : String(err)}\n`); });
  };
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onInt);
  try { return await followLoop(dir, hub, run, o, progress, deadline, remote); } finally { process.off('SIGINT', onInt); process.off('SIGTERM', onInt); }
}

async function followLoop(dir: string, hub: ControlTarget, run: string, o: RunOptions, progress: Progress, deadline: number, remote: boolean): Promise<RunView> {
  for (;;) {
    let v: RunView;
    try {
      v = await call<RunView>(hub, 'POST', `/runs/${encodeURIComponent(run)}/wait`, { timeout_ms: 250 }, 30_000);
    } catch (err) {
      if (!(err instanceof SwarmError) || (err.code !== 'SWARM_ERR_NO_SWARM' && err.code !== 'SWARM_ERR_UNKNOWN_RUN') || Date.now() > deadline) throw err;
      progress.update(`run ${run}: the hub is not answering (${err.code}); waiting for it to return…`);
      await new Promise((r) => setTimeout(r, 500));
      if (!remote) hub = readHubFile(dir) ?? hub;
      continue;
    }
    const p = v.progress;
    if (p) progress.update(progressLine(run, v.topology, p));
    if (v.state === 'done' || Date.now() > deadline) { progress.done(); return v; }
  }
}

/** `run R star: nodes 2 done, 1 running, 0 failed · …`; a cancelled run's unfinished nodes count as cancelled. */
function progressLine(run: string, topology: string, p: NonNullable<RunView['progress']>): string {
  const cancelled = p.cancelled ? `, ${p.cancelled} cancelled` : '';
  return `run ${run} ${topology}: nodes ${p.done} done, ${p.running} running, ${p.failed} failed${cancelled} · ${p.tokens_per_s.toFixed(1)} tok/s · ${(p.elapsed_ms / 1000).toFixed(1)} s`;
}

function printView(v: RunView): void {
  const o = v.outcome;
  const out = (o?.output ?? '').trim();
  process.stdout.write([
    `run ${v.run} (${v.experiment}, ${v.topology}): ${o?.verdict ?? v.state}${o?.reason ? ` — ${o.reason}` : ''}`,
    ...(o?.details?.winner !== undefined ? [`  winner: contestant ${String(o.details.winner)}, ${kappaText(o.details)}`] : []),
    ...(o?.details?.experiment ? [printExperiment(o.details.experiment as never, v.dir)] : []),
    `  output: ${out.length > 300 ? `${out.slice(0, 300)}…` : out || '(empty)'}`,
    `  folder: ${v.dir} (report.html)`,
    '',
  ].join('\n'));
}

/** The judges' agreement; an undefined kappa says why (every rating in one category: chance agreement is 1). */
export function kappaText(d: Record<string, unknown>): string {
  const method = String(d.kappa_method);
  if (d.kappa === null || d.kappa === undefined) {
    return method === 'none' ? 'kappa undefined (fewer than two judges gave usable ratings)'
      : `kappa undefined (${method}): every rating fell in one category, so agreement expected by chance is 1 and kappa divides by zero`;
  }
  return `kappa ${Number(d.kappa).toFixed(3)} (${method})`;
}
