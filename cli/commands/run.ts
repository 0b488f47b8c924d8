import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/index.js';
import { alive } from '../../hub/index.js';
import { loadExperiment, resolveInputs, type Experiment, type RunSpec } from '../../topologies/index.js';
import { Exit, fail } from '../exit.js';
import { call } from '../http.js';
import { int } from '../options.js';
import { Progress } from '../progress.js';
import { readHubFile, stateDir, type HubFile } from '../state.js';
import { compareRuns, readRunDir } from './runs.js';

interface RunView {
  run: string; state: 'running' | 'done'; experiment: string; topology: string; dir: string;
  progress?: { submitted: number; done: number; failed: number; running: number; tokens_out: number; tokens_per_s: number; elapsed_ms: number };
  outcome?: { output: string; verdict?: string; reason?: string; details?: Record<string, unknown> };
}

interface RunOptions {
  agents?: number; repeat: number; set: string[]; json: boolean; replay?: string; stateDir?: string;
  timeout: number; driver?: string; model?: string;
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
    .option('--model <path>', 'model for a swarm started for this run (default: the roles\' model)')
    .option('--timeout <ms>', 'give up waiting after this long', int('--timeout', 1), 3_600_000)
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--json', 'print JSON', false)
    .action(async (file: string | undefined, o: RunOptions) => {
      try {
        const dir = stateDir(o.stateDir);
        const plan = prepare(file, o, dir);
        const hub = await ensureSwarm(dir, plan, o);
        const views: RunView[] = [];
        for (let i = 0; i < o.repeat; i++) {
          const set = o.repeat > 1 ? [...o.set, `seed=${plan.experiment.seed + i}`] : o.set;
          const { run } = await call<{ run: string }>(hub, 'POST', '/runs', {
            experiment: plan.experiment, inputs: plan.inputs, base_dir: plan.baseDir, set: plan.replayOf ? [] : set,
            replay_of: plan.replayOf, driver: plan.driver, model: plan.model,
          }, 120_000);
          views.push(await follow(dir, hub, run, o));
        }
        if (o.json) process.stdout.write(JSON.stringify(views.length === 1 ? views[0] : { runs: views }) + '\n');
        else for (const v of views) printView(v);
        if (!o.json && views.length > 1) process.stdout.write(compareRuns(views.map((v) => readRunDir(v.dir)!)) + '\n');
        if (views.some((v) => v.state !== 'done')) process.exit(Exit.TIMEOUT);
        if (views.some((v) => v.outcome?.verdict === 'failed')) process.exit(Exit.TASKS_FAILED);
        process.exit(Exit.OK);
      } catch (err) { fail(err, o.json); }
    });
}

interface Plan { experiment: Experiment; inputs?: RunSpec['inputs']; baseDir: string; replayOf?: string; driver?: string; model?: string }

/** Validate everything before any swarm starts or any task is submitted. */
function prepare(file: string | undefined, o: RunOptions, dir: string): Plan {
  if (o.replay) {
    const rd = path.join(dir, 'runs', o.replay);
    let spec: RunSpec;
    try { spec = JSON.parse(fs.readFileSync(path.join(rd, 'spec.json'), 'utf8')) as RunSpec; } catch {
      throw new SwarmError('SWARM_ERR_CONFIG', `no recorded run ${o.replay} in ${path.join(dir, 'runs')}`);
    }
    const passport = JSON.parse(fs.readFileSync(path.join(rd, 'passport.json'), 'utf8')) as { models?: { path: string }[]; drivers?: { driver: string }[] };
    return { experiment: spec.experiment, inputs: spec.inputs, baseDir: process.cwd(), replayOf: o.replay, driver: o.driver ?? passport.drivers?.[0]?.driver, model: o.model ?? passport.models?.[0]?.path };
  }
  if (!file) throw new SwarmError('SWARM_ERR_CONFIG', 'give an experiment file, or --replay RUN');
  const experiment = loadExperiment(file, { set: o.set });
  const baseDir = path.dirname(path.resolve(file));
  const inputs = resolveInputs(experiment, baseDir);
  const roles = Object.values(experiment.roles);
  const driver = o.driver ?? roles.find((r) => r.driver)?.driver;
  const model = o.model ?? ((m) => (m ? path.resolve(baseDir, m) : undefined))(roles.find((r) => r.model)?.model);
  const models = new Set(roles.flatMap((r) => (r.model ? [path.resolve(baseDir, r.model)] : [])));
  const drivers = new Set(roles.flatMap((r) => (r.driver ? [r.driver] : [])));
  if ((models.size > 1 || drivers.size > 1) && !o.json && roles.every((r) => !r.caps)) {
    process.stderr.write('note: roles name more than one driver or model, but no caps: any worker takes any role. Give each role caps and start matching workers (swarm worker --caps …).\n');
  }
  // The set overrides are already applied; the hub gets the resolved experiment.
  o.set = [];
  return { experiment, inputs, baseDir, driver, model };
}

/** The running swarm of the state dir, or a new one (`swarm up --detach`) sized for the experiment. */
async function ensureSwarm(dir: string, plan: Plan, o: RunOptions): Promise<HubFile> {
  const h = readHubFile(dir);
  if (h && alive(h.pid)) {
    if (o.agents !== undefined && h.agents !== undefined && h.agents !== o.agents && !o.json) {
      process.stderr.write(`note: using the running swarm of ${h.agents} agent(s); --agents only sizes a swarm this command starts\n`);
    }
    return h;
  }
  const agents = o.agents ?? Math.max(1, Math.min(64, Object.values(plan.experiment.roles).reduce((s, r) => s + r.agents, 0)));
  const args = [CLI, 'up', '--detach', '--state-dir', dir, '--agents', String(agents), '--driver', plan.driver ?? 'echo'];
  if (plan.model) args.push('--model', plan.model);
  if (!o.json) process.stderr.write(`no running swarm in ${dir}; starting one: swarm ${args.slice(1).join(' ')}\n`);
  const code = await new Promise<number | null>((resolve) => {
    const c = spawn(process.execPath, [...process.execArgv, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
    c.once('exit', (code) => resolve(code));
  });
  const started = readHubFile(dir);
  if (code !== 0 || !started) throw new SwarmError('SWARM_ERR_NO_SWARM', `could not start a swarm (swarm up exited with ${code})`);
  return started;
}

/**
 * Poll the run, drawing a progress line, until it is done or the timeout passes. A hub that goes
 * away (restart, failover) is waited for: the run resumes on the hub that comes back.
 */
async function follow(dir: string, hub: HubFile, run: string, o: RunOptions): Promise<RunView> {
  const progress = new Progress(o.json);
  const deadline = Date.now() + o.timeout;
  for (;;) {
    let v: RunView;
    try {
      v = await call<RunView>(hub, 'POST', `/runs/${encodeURIComponent(run)}/wait`, { timeout_ms: 250 }, 30_000);
    } catch (err) {
      if (!(err instanceof SwarmError) || (err.code !== 'SWARM_ERR_NO_SWARM' && err.code !== 'SWARM_ERR_UNKNOWN_RUN') || Date.now() > deadline) throw err;
      progress.update(`run ${run}: the hub is not answering (${err.code}); waiting for it to return…`);
      await new Promise((r) => setTimeout(r, 500));
      hub = readHubFile(dir) ?? hub;
      continue;
    }
    const p = v.progress;
    if (p) progress.update(`run ${run} ${v.topology}: nodes ${p.done} done, ${p.running} running, ${p.failed} failed · ${p.tokens_per_s.toFixed(1)} tok/s · ${(p.elapsed_ms / 1000).toFixed(1)} s`);
    if (v.state === 'done' || Date.now() > deadline) { progress.done(); return v; }
  }
}

function printView(v: RunView): void {
  const o = v.outcome;
  const out = (o?.output ?? '').trim();
  process.stdout.write([
    `run ${v.run} (${v.experiment}, ${v.topology}): ${o?.verdict ?? v.state}${o?.reason ? ` — ${o.reason}` : ''}`,
    ...(o?.details?.winner !== undefined ? [`  winner: contestant ${String(o.details.winner)}, kappa ${o.details.kappa === null ? 'undefined' : Number(o.details.kappa).toFixed(3)} (${String(o.details.kappa_method)})`] : []),
    `  output: ${out.length > 300 ? `${out.slice(0, 300)}…` : out || '(empty)'}`,
    `  folder: ${v.dir} (report.html)`,
    '',
  ].join('\n'));
}
