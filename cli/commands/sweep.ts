import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { writeFileAtomic } from '../../protocol/atomic-file.js';
import { loadExperiment, resolveInputs, type Experiment } from '../../topologies/index.js';
import type { ExperimentResult } from '../../topologies/experiment/index.js';
import { cellSets, cells, groups, parseAxis, type Cell, type SweepFile } from '../../topologies/experiment/sweep.js';
import { sweepHtml } from '../../topologies/experiment/sweep-report.js';
import { taskTable, taskTableCsv } from '../../topologies/experiment/task-table.js';
import { modelLine, simulatedNote } from '../../topologies/experiment/report.js';
import type { Passport } from '../../topologies/passport.js';
import { Exit, fail } from '../exit.js';
import { call } from '../http.js';
import { int, keyValue } from '../options.js';
import { readHubFile, stateDir, type HubFile } from '../state.js';
import { alive } from '../../hub/supervisor.js';
import { checkEngine, routeRoles } from './run-pools.js';
import { checkModels, chooseModels, ensureSwarm, follow, loadExperimentOrUndefined, overrideRoles, prepare, resolveModels, type RunOptions, type RunView } from './run.js';
import { cellHash, engineIdentity } from './sweep-cells.js';

interface SweepOptions extends RunOptions { grid: string[]; seeds: number; out?: string }

const collect = (v: string, prev: string[] = []) => [...prev, v];

export function registerSweep(program: Command): void {
  program.command('sweep')
    .description('run an experiment over a grid of settings and seeds (resumable), and write sweep.json and sweep.html')
    .argument('<experiment>', 'experiment file with inputs.dataset (YAML or JSON)')
    .option('--grid <key=v1,v2>', 'a grid axis: a dotted field or agents (debaters, contestants or voters); repeatable, the cells are the cartesian product', collect, [])
    .option('--seeds <n>', 'seeds per grid point: seed, seed+1, …', int('--seeds', 1), 1)
    .option('--set <key=value>', 'override a field for every cell (repeatable)', collect, [])
    .option('--out <dir>', 'sweep folder (default <state-dir>/sweeps/<experiment name>); a sweep.json there is resumed')
    .option('-n, --agents <n>', 'agents for a swarm started for this sweep', int('--agents', 1))
    .option('--driver <name>', 'driver for a swarm started for this sweep (every role)')
    .option('--model <path>', 'model for a swarm started for this sweep (every role)')
    .option('--driver-opt <key=value>', 'driver option for a swarm started for this sweep (repeatable)', keyValue, {})
    .option('--timeout <ms>', 'give up waiting for one cell after this long', int('--timeout', 1), 3_600_000)
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--json', 'print JSON', false)
    .action(async (file: string, o: SweepOptions) => {
      try { await sweep(file, { ...o, repeat: 1 }); } catch (err) { fail(err, o.json); }
    });
}

async function sweep(file: string, o: SweepOptions): Promise<void> {
  const dir = stateDir(o.stateDir);
  const baseSets = [...o.set];
  const plan = prepare(file, o, dir);
  if (plan.experiment.inputs.dataset === undefined) throw new SwarmError('SWARM_ERR_CONFIG', `${file}: a sweep needs inputs.dataset (items with expected answers)`);
  const axes = o.grid.map(parseAxis);
  const list = cells(axes, o.seeds, plan.experiment.seed);
  // What a running swarm runs (a mismatch with --driver/--model/--driver-opt is refused here, before any cell).
  const h = readHubFile(dir);
  const running = h && alive(h.pid) ? await checkEngine(dir, h, o) : undefined;
  // No swarm yet: the model one would start with is chosen now, so this sweep and the next key their cells alike.
  if (!running) await chooseModels(plan, o);
  const engine = engineIdentity(o, running, plan.pools[0]?.driver, plan.pools[0]?.model);
  // Every cell is validated, and keyed by what it would run, before anything runs.
  const plain = loadExperimentOrUndefined(file);
  const experiments = new Map<string, Experiment>();
  for (const c of list) {
    let e = resolveModels(loadExperiment(file, { set: [...baseSets, ...cellSets(plan.experiment, c)] }), plain, plan.baseDir);
    if (o.driver || o.model) e = overrideRoles(e, o.driver, o.model);
    checkModels(e);
    experiments.set(c.key, e);
    const h = await cellHash(e, engine, plan.baseDir);
    Object.assign(c, { hash: h.hash, ...(h.dataset_sha256 ? { dataset_sha256: h.dataset_sha256 } : {}) });
  }
  const out = path.resolve(o.out ?? path.join(dir, 'sweeps', plan.experiment.name));
  fs.mkdirSync(out, { recursive: true });
  const jsonPath = path.join(out, 'sweep.json');
  const prev = readSweep(jsonPath);
  // A previous cell counts only when it ran exactly this experiment on this engine.
  const same = (c: Cell) => prev?.cells.find((p) => p.key === c.key && p.hash !== undefined && p.hash === c.hash);
  const f: SweepFile = {
    experiment: plan.experiment.name, file: path.resolve(file), topology: plan.experiment.topology, dataset: plan.experiment.inputs.dataset, grid: axes, seeds: o.seeds,
    base_seed: plan.experiment.seed, engine, ran: list.some((c) => same(c)) ? prev?.ran : undefined, simulated: list.some((c) => same(c)) ? prev?.simulated : undefined,
    cells: list.map((c) => ({ ...c, ...pick(same(c)) })), updated_at: new Date().toISOString(),
  };
  const runsDir = path.join(dir, 'runs');
  const finished = (c: Cell) => c.state === 'done' && c.run !== undefined && fs.existsSync(path.join(runsDir, c.run, 'result.json'));
  const todo = f.cells.filter((c) => !finished(c));
  const reused = f.cells.length - todo.length;
  const changed = prev ? list.filter((c) => prev.cells.some((p) => p.key === c.key && p.hash !== c.hash)).length : 0;
  if (!o.json) process.stderr.write(`sweep ${f.experiment}: ${f.cells.length} cells (${axes.map((a) => `${a.key} × ${a.values.length}`).join(', ') || 'no grid'}, ${o.seeds} seed(s)); ${reused} already done, ${todo.length} to run${changed ? ` (${changed} changed since their last run: experiment, engine, model or dataset)` : ''}; folder ${out}\n`);
  const save = () => {
    f.updated_at = new Date().toISOString();
    writeFileAtomic(jsonPath, JSON.stringify(f, null, 2), 0o644);
    writeFileAtomic(path.join(out, 'sweep.html'), page(f, runsDir, out), 0o644);
    writeFileAtomic(path.join(out, 'tasks.csv'), taskTableCsv(taskTable(f, groups(f, rowsReader(runsDir), f.base_seed), path.basename(f.dataset ?? f.experiment).replace(/\.jsonl?$/, ''))), 0o644);
  };
  // Ctrl-C or SIGTERM: the running cell is cancelled (follow does that) and no further cell starts.
  let stopping = false;
  const onStop = (): void => { stopping = true; };
  process.on('SIGINT', onStop);
  process.on('SIGTERM', onStop);
  const interrupted = (c?: Cell): never => {
    if (c) { Object.assign(c, { state: 'pending' }); delete c.run; }
    save();
    if (!o.json) process.stderr.write(`sweep ${f.experiment}: interrupted; ${f.cells.filter((x) => x.state === 'done').length} of ${f.cells.length} cells done. Run the same command to go on.\n`);
    process.exit(Exit.INTERRUPTED);
  };
  let hub: HubFile | undefined;
  let ran = 0;
  for (const c of todo) {
    if (stopping) interrupted();
    hub ??= await ensureSwarm(dir, plan, o);
    let e = experiments.get(c.key)!;
    if (plan.pools.length > 1) e = routeRoles(e, plan.pools);
    // A cell an interrupted sweep left running is an orphan: a finished run is kept, an unfinished one
    // is cancelled and the cell started again (nobody is left waiting for it).
    let run = c.state === 'running' && c.run ? await adoptOrCancel(hub, c.run) : undefined;
    if (!run) {
      const inputs = resolveInputs(e, plan.baseDir);
      run = (await call<{ run: string }>(hub, 'POST', '/runs', { experiment: e, inputs, base_dir: plan.baseDir, driver: plan.driver, model: plan.model, ...(plan.driverOpt ? { driver_options: plan.driverOpt } : {}) }, 120_000)).run;
      ran++;
    }
    Object.assign(c, { run, state: 'running' });
    save();
    const v = await follow(dir, hub, run, o);
    if (stopping || v.outcome?.verdict === 'cancelled') interrupted(c);
    // The run is done when its outcome is known; its folder's result.json (what the pages read) follows shortly.
    if (v.state === 'done') await waitFor(path.join(runsDir, run, 'result.json'), 60_000);
    const x = v.outcome?.details?.experiment as ExperimentResult | undefined;
    if (v.state !== 'done') { c.state = 'running'; save(); process.exit(Exit.TIMEOUT); }
    if (!x) { Object.assign(c, { state: 'failed', error: `${v.outcome?.verdict ?? 'no result'}${v.outcome?.reason ? `: ${v.outcome.reason}` : ''}` }); save(); continue; }
    Object.assign(c, { state: 'done', result: { conditions: x.conditions, comparisons: x.comparisons, budget: x.budget, items: x.items, scorer: x.scorer } });
    delete c.error;
    if (!f.ran) {
      const pp = readPassport(path.join(runsDir, run));
      if (pp) { f.ran = modelLine(pp, x); f.simulated = simulatedNote(pp, x) !== undefined; }
    }
    save();
  }
  process.off('SIGINT', onStop);
  process.off('SIGTERM', onStop);
  save();
  if (o.json) { process.stdout.write(JSON.stringify({ sweep: jsonPath, html: path.join(out, 'sweep.html'), csv: path.join(out, 'tasks.csv'), cells: f.cells.length, ran, reused }) + '\n'); }
  else {
    const g = groups(f, rowsReader(runsDir), f.base_seed);
    if (f.simulated) process.stdout.write('SIMULATED DRIVER: answers are synthetic; these numbers test the machinery, not a model.\n');
    process.stdout.write(`${f.ran ?? ''}\n`);
    for (const x of g) process.stdout.write(`  ${x.label.padEnd(28)} ${x.condition.padEnd(18)} ${x.summary.mean.toFixed(3)} ± ${x.summary.se.toFixed(3)} [${x.summary.ci[0].toFixed(3)}, ${x.summary.ci[1].toFixed(3)}] n=${x.summary.n} × ${x.seeds} seed(s)  failed ${x.failed}  ${x.tokens_per_item.toFixed(0)} tokens/item${x.k !== undefined ? `  k=${x.k}` : ''}\n`);
    process.stdout.write(`${ran} cell run(s) started, ${reused} reused\nsweep.json: ${jsonPath}\nsweep.html: ${path.join(out, 'sweep.html')}\ntasks.csv: ${path.join(out, 'tasks.csv')}\n`);
  }
  if (plan.started) process.stderr.write(`note: the swarm this command started is still running (state dir ${dir}); stop it with: swarm down${o.stateDir ? ` --state-dir ${o.stateDir}` : ''}\n`);
  process.exit(f.cells.some((c) => c.state === 'failed') ? Exit.TASKS_FAILED : Exit.OK);
}

/** An orphaned run: kept when it finished with a result, else cancelled (undefined: start the cell again). */
async function adoptOrCancel(hub: HubFile, run: string): Promise<string | undefined> {
  const v = await call<RunView>(hub, 'GET', `/runs/${encodeURIComponent(run)}`, undefined, 10_000).catch(() => undefined);
  if (!v) return undefined;
  if (v.state === 'done') return v.outcome?.details?.experiment ? run : undefined;
  await call(hub, 'POST', `/runs/${encodeURIComponent(run)}/cancel`, { reason: 'orphaned: the sweep that started it ended; the cell is started again' }, 30_000).catch(() => undefined);
  return undefined;
}

async function waitFor(file: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!fs.existsSync(file) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
}

function pick(c: Cell | undefined): Partial<Cell> {
  if (!c) return {};
  return { ...(c.run ? { run: c.run } : {}), state: c.state, ...(c.result ? { result: c.result } : {}), ...(c.error ? { error: c.error } : {}) };
}

function readSweep(file: string): SweepFile | undefined {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')) as SweepFile; } catch { return undefined; }
}

function readPassport(runDir: string): Passport | undefined {
  try { return JSON.parse(fs.readFileSync(path.join(runDir, 'passport.json'), 'utf8')) as Passport; } catch { return undefined; }
}

type Rows = { id: string; expected: string; cells: Record<string, { score: number | null }> }[];

function rowsReader(runsDir: string): (run: string) => Rows | undefined {
  const cache = new Map<string, Rows | undefined>();
  return (run) => {
    if (!cache.has(run)) {
      try {
        const r = JSON.parse(fs.readFileSync(path.join(runsDir, run, 'result.json'), 'utf8')) as { details?: { experiment?: ExperimentResult } };
        cache.set(run, r.details?.experiment?.rows);
      } catch { cache.set(run, undefined); }
    }
    return cache.get(run);
  };
}

function page(f: SweepFile, runsDir: string, out: string): string {
  const rowsOf = rowsReader(runsDir);
  const first = f.cells.find((c) => c.state === 'done' && c.run);
  const items = (first ? rowsOf(first.run!) : undefined)?.map((r) => ({ id: r.id, expected: r.expected })) ?? [];
  return sweepHtml({ file: f, groups: groups(f, rowsOf, f.base_seed), items, rowsOf, href: (run) => path.relative(out, path.join(runsDir, run, 'experiment.html')) });
}
