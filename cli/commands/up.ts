import type { Readable } from 'node:stream';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { Exit, fail } from '../exit.js';
import { int, keyValue } from '../options.js';
import { MAX_SLOTS } from '../../protocol/bounds.js';
import { hostRefusal } from '../agent-bound.js';
import { Progress } from '../progress.js';
import { readiness, readyCounter } from '../ready.js';
import { logPath, readHubFile, stateDir, type HubFile } from '../state.js';
import { hubNodeArgs } from '../node-args.js';
import { markStarting } from '../starting.js';
import { AWAIT_DOWN_MS, awaitStopped } from '../stopping.js';
import { MIN_FREE_BYTES, fullDisk, refuseFullDisk, spaceLeft } from '../disk-space.js';
import { stoppingHeld } from '../state-lock.js';
import { archiveMaxArg, hubConfigFrom, hubOptions, hubToken, retainArg, type HubCliOptions } from './hub.js';
import { PROCS_HELP, parseProcs, supervisedProcesses, type Procs } from '../procs.js';
import { ORPHAN_EXIT_HELP, workerArgs } from './worker.js';
import { ORPHAN_EXIT_MAX_MS } from '../../worker/orphan-bounds.js';
import { DEFAULT_DRIVER, chooseModel, type ChosenModel } from '../model.js';
import { planRefusal } from '../up-plan.js';
import { DEFAULT_ENGINE, engineDriver, parseEngineMode, type EngineMode } from '../shared-engine.js';
import { startProcess } from '../../drivers/lifecycle.js';
import { driverOptionsHelp } from '../../drivers/option-summary.js';
import { capsList } from '../file-option.js';

interface UpOptions extends HubCliOptions {
  agents: number; procs: Procs; driver: string; driverOpt: Record<string, string>; model?: string; slots: number; engine: EngineMode; failover: boolean; caps?: string; orphanExitMs?: number;
  detach: boolean; json: boolean; readyTimeout: number; dashboard: boolean; force: boolean;
}

const CLI = fileURLToPath(new URL('../main.js', import.meta.url));

export function registerUp(program: Command): void {
  const cmd = program.command('up').description('start a hub and N workers as one supervised swarm');
  hubOptions(cmd)
    .option('-n, --agents <n>', 'number of agents (workers)', int('--agents', 1), 4)
    .option('--procs <n>', PROCS_HELP, parseProcs, 'auto')
    .option('--driver <name>', 'engine driver: embedded (llama.cpp in-process), llama-server, llama-cli, echo, exec, …', DEFAULT_DRIVER)
    .option('--driver-opt <key=value>', 'driver option (repeatable)', keyValue, {})
    .option('--model <path>', 'GGUF model file or hf: URI (env SWARM_MODEL; default: a built-in random-weight demo model)')
    .option('--engine <mode>', 'batched: one llama.cpp engine for all agents, a sequence each (batching, no compile); per-worker: an engine per worker (isolation); llama-server (= shared): one llama-server -np N (needs `swarm engine build`)', parseEngineMode, DEFAULT_ENGINE)
    .option('--failover', 'hybrid star-gossip (the default): workers keep a replica of the queue and results, and finish the run, topologies included, by gossip if the hub dies', true)
    .option('--no-failover', 'star only: no peer ports, and a run waits for a hub that dies (a little cheaper: see README)')
    .option('--slots <n>', 'tasks in flight per worker', int('--slots', 1, MAX_SLOTS), 1)
    .option('--caps <list>', 'capabilities of the workers (comma-separated): tasks that ask for caps go only to workers that have them', capsList)
    .option('--orphan-exit-ms <ms>', ORPHAN_EXIT_HELP, int('--orphan-exit-ms', 0, ORPHAN_EXIT_MAX_MS))
    .option('-d, --detach', 'return once ready; the swarm keeps running (stop it with `swarm down`)', false)
    .option('--ready-timeout <ms>', 'give up if the workers are not ready in time', int('--ready-timeout', 1), 120_000)
    .option('--json', 'print the summary as JSON', false)
    .option('--force', 'start more agents than `swarm plan` says fit in this machine\'s memory, or than its open files and ports hold', false)
    .option('--dashboard', 'once ready, print a one-time dashboard link and open it (see `swarm dashboard`)', false)
    .addHelpText('after', driverOptionsHelp())
    .action(async (o: UpOptions) => {
      try {
        refuseFullDisk(stateDir(o.stateDir));
        await startTurn(stateDir(o.stateDir));
        // Once, here: workers get the resulting path and never make or download a model themselves.
        const model = await chooseModel(o.driver, o.model, { quiet: o.json });
        if (!o.force) {
          // Two bounds, memory (the plan's) and the host's open files and ports: the lower is named.
          const refusals = [
            await planRefusal({ model: model.path, driver: o.driver, engine: o.engine, agents: o.agents, slots: o.slots, ctx: o.driverOpt.ctx, procs: o.procs }),
            hostRefusal(o.agents, o.failover),
          ].filter((r) => r !== undefined);
          const lowest = refusals.sort((a, b) => a.max - b.max)[0];
          if (lowest) throw lowest.error;
        }
        if (o.detach) await upDetached(o, model);
        else await upForeground(o, model);
      } catch (err) { fail(err, o.json); }
    });
}

/**
 * Refuse a running swarm and mark this one as starting, once no `swarm down` is stopping one here: a
 * hub started beside a stopping one lost its workers to that `down`'s sweep of leftovers. Marked
 * before the stop lock is looked at again, so a `down` that starts meanwhile finds this mark (and
 * stops this start), or this finds its lock (and waits for it).
 */
async function startTurn(dir: string): Promise<void> {
  for (;;) {
    const free = await awaitStopped(dir, AWAIT_DOWN_MS, (pid) => {
      process.stderr.write(`swarm up: a \`swarm down\`${pid ? ` (pid ${pid})` : ''} is stopping the swarm in ${dir}: waiting for it to finish\n`);
    });
    if (!free) throw new SwarmError('SWARM_ERR_ALREADY_RUNNING', `a \`swarm down\` is still stopping the swarm in ${dir} after ${AWAIT_DOWN_MS} ms`);
    // Refused before anything else is said (the demo model's notice) or done.
    await refuseIfRunning(dir);
    // From here until hub.json is written, `swarm down` finds this swarm by this mark.
    const unmark = markStarting(dir);
    if (!await stoppingHeld(dir)) return;
    unmark();
  }
}

async function refuseIfRunning(dir: string): Promise<void> {
  const prev = readHubFile(dir);
  const r = await import('../running.js');
  // A hub of a pid namespace this one cannot see (a container's, a host's) is running if it answers.
  if (prev && (r.hubIsOurs(prev, dir) || (r.hubUnseen(prev) && await r.hubAnswers(prev)))) throw new SwarmError('SWARM_ERR_ALREADY_RUNNING', `a swarm (hub pid ${prev.pid}) is already running in ${dir}`);
}

/** Supervised workers' arguments; `peerTls` only where they go to workers directly (a detached hub derives them from its own --tls-*). */
function args(o: UpOptions, model: ChosenModel, peerTls = false) {
  const { driver, driverOpt } = engineDriver(o.engine, o.driver, o.driverOpt, o.agents, o.slots);
  return workerArgs({ driver, driverOpt, model: model.path, slots: o.slots, failover: o.failover, caps: o.caps, orphanExitMs: o.orphanExitMs, maxLine: o.maxLine, ...(peerTls ? { tlsCert: o.tlsCert, tlsKey: o.tlsKey } : {}) });
}

// The hub's code loads only in the process that runs the hub: `up --detach` starts `swarm hub` as
// fast as it can (its own CPU would delay the hub and the workers on a small machine).
async function upForeground(o: UpOptions, model: ChosenModel): Promise<void> {
  const t0 = performance.now();
  const [{ makeLogger }, { runHub }] = await Promise.all([import('../log.js'), import('../run-hub.js')]);
  const dir = stateDir(o.stateDir);
  const supervised = args(o, model, true); // refused settings before anything is written
  const log = makeLogger('hub', logPath(dir, 'hub'));
  const token = hubToken(o, dir);
  const running = await runHub({ dir, log, config: hubConfigFrom(o, token), agents: o.agents, procs: o.procs, workerArgs: supervised, journal: o.journal,
    sharedEngine: o.engine === 'shared' ? { model: model.path, slotsPerWorker: o.slots } : undefined });
  let interrupted = false;
  const onSignal = () => { interrupted = true; if (!o.json) process.stderr.write('\nstopping swarm…\n'); void running.stop(); };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const progress = new Progress(o.json);
  let engineError: string | undefined;
  const ready = await waitFor(() => {
    const r = readiness(running.hub.registry.all());
    engineError = r.error;
    return r.error === undefined ? r.ready : -1;
  }, o.agents, o.readyTimeout, progress, () => interrupted);
  if (!ready) {
    await running.stop();
    if (engineError !== undefined) throw new SwarmError('SWARM_ERR_ENGINE_START', `${engineError}\nsee ${path.join(dir, 'logs')}`);
    throw new SwarmError('SWARM_ERR_TIMEOUT', `only ${running.hub.registry.size}/${o.agents} workers ready after ${o.readyTimeout} ms; see ${path.join(dir, 'logs')}`);
  }
  summary(o, model, running.file, dir, performance.now() - t0, false);
  if (o.dashboard) await (await import('./dashboard.js')).openDashboard(running.file, { open: true, json: o.json });
  if (!o.json) process.stderr.write('running in the foreground; Ctrl-C stops every process of the swarm\n');
  await running.stopped;
  process.exit(interrupted ? Exit.OK : Exit.OK);
}

async function upDetached(o: UpOptions, model: ChosenModel): Promise<void> {
  const t0 = performance.now();
  const dir = stateDir(o.stateDir);
  // Settings refused (too few engine sequences) before anything is written to the state directory.
  const supervised = args(o, model);
  const token = hubToken(o, dir); // a refused token too
  fs.mkdirSync(path.join(dir, 'logs'), { recursive: true, mode: 0o700 });
  const hubArgs = [CLI, 'hub', '--state-dir', dir, '--supervise', String(o.agents), '--procs', String(o.procs), '--log-file', logPath(dir, 'hub'),
    '--host', o.host, '--port', String(o.port), '--control-port', String(o.controlPort),
    '--heartbeat-ms', String(o.heartbeatMs), '--dead-after-ms', String(o.deadAfterMs), '--max-line', String(o.maxLine),
    '--max-attempts', String(o.maxAttempts), '--max-tokens', String(o.maxTokens), '--prefetch-below-ms', String(o.prefetchBelowMs), '--lease-ahead-ms', String(o.leaseAheadMs), '--fsync', o.fsync, '--max-worker-links', String(o.maxWorkerLinks), '--max-control-connections', String(o.maxControlConnections), ...retainArg(o.retain), ...archiveMaxArg(o.archiveMax), '--ready-fd', '3', ...supervised];
  if (o.tlsCert) hubArgs.push('--tls-cert', o.tlsCert);
  if (o.tlsKey) hubArgs.push('--tls-key', o.tlsKey);
  if (o.tlsCa) hubArgs.push('--tls-ca', o.tlsCa);
  if (o.controlHost) hubArgs.push('--control-host', o.controlHost);
  if (!o.journal) hubArgs.push('--no-journal');
  if (o.insecureNoAuth) hubArgs.push('--insecure-no-auth');
  // Always named: the hub's own default (batched) would otherwise turn per-worker engines into one batched engine.
  hubArgs.push('--engine', o.engine);
  if (o.failover) hubArgs.push('--failover');
  if (o.msgpack) hubArgs.push('--msgpack');
  if (o.roles) hubArgs.push('--roles', Object.entries(o.roles).map(([role, n]) => `${role}=${n}`).join(','));
  const out = fs.openSync(logPath(dir, 'hub.stderr'), 'a');
  // fd 3: the hub reports connected workers there (cli/ready.ts), so nothing polls it while they start.
  const child = startProcess(process.execPath, [...hubNodeArgs(), ...hubArgs], { stdio: ['ignore', out, out, 'pipe'], env: { ...process.env, ...(token ? { SWARM_TOKEN: token } : {}) } });
  const joined = readyCounter(child.stdio[3] as Readable);
  fs.closeSync(out);
  let exited: string | undefined;
  let stopped = false;
  child.once('exit', (code, signal) => {
    exited = `hub exited (code ${code}, signal ${signal})`;
    // A clean exit or a stop signal: someone stopped it (`swarm down` run meanwhile), not a crash.
    stopped = code === 0 || signal === 'SIGTERM' || signal === 'SIGINT';
  });
  child.unref();
  const progress = new Progress(o.json);
  let count = 0;
  const ready = await waitFor(() => {
    if (exited || joined.error() !== undefined) return -1;
    count = joined.count();
    return count;
  }, o.agents, o.readyTimeout, progress, () => exited !== undefined);
  (child.stdio[3] as Readable).destroy();
  const engineError = joined.error();
  if (engineError !== undefined) {
    // Left running: `swarm status` names the error and tasks fail with it; `swarm down` stops it.
    throw new SwarmError('SWARM_ERR_ENGINE_START', `${engineError}\nthe swarm is not ready; it keeps running so that \`swarm status\` shows this (\`swarm down\` stops it)`);
  }
  const hub = ((h) => (h && h.pid === child.pid ? h : undefined))(readHubFile(dir));
  if (!ready || !hub) {
    const tail = readTail(logPath(dir, 'hub.stderr'));
    if (!exited && child.pid) try { process.kill(child.pid, 'SIGTERM'); } catch { /* gone */ }
    // A hub that refused to start (port taken, bad config) said why as `swarm: CODE: message`: that is the error.
    const own = exited ? hubError(tail) : undefined;
    if (own) throw own;
    // A hub on a disk that filled as it started cannot write its files, nor say why (its log is on that disk too).
    const free = spaceLeft(dir);
    if (free !== undefined && free < MIN_FREE_BYTES) throw fullDisk(dir, free, `${exited ?? `only ${count}/${o.agents} workers ready after ${o.readyTimeout} ms`}: the hub could not write its files (its workers' pid files, its log)`);
    if (stopped) throw new SwarmError('SWARM_ERR_SHUTDOWN', `the swarm was stopped while it started (\`swarm down\` or a signal to the hub); nothing of it runs${tail ? `\n${tail}` : ''}`);
    throw new SwarmError(exited ? 'SWARM_ERR_INTERNAL' : 'SWARM_ERR_TIMEOUT', `${exited ?? `only ${count}/${o.agents} workers ready after ${o.readyTimeout} ms`}${tail ? `\n${tail}` : ''}`);
  }
  summary(o, model, hub, dir, performance.now() - t0, true);
  if (o.dashboard) await (await import('./dashboard.js')).openDashboard(hub, { open: true, json: o.json });
  process.exit(Exit.OK);
}

/** The hub's own `swarm: SWARM_ERR_X: message` line in its stderr, as that error. */
function hubError(tail: string | undefined): SwarmError | undefined {
  const m = tail?.split('\n').reverse().map((l) => /^swarm: (SWARM_ERR_[A-Z_]+): (.*)$/.exec(l)).find(Boolean);
  if (!m) return undefined;
  try { return new SwarmError(m[1] as SwarmError['code'], `hub: ${m[2]}`); } catch { return undefined; }
}

async function waitFor(count: () => number | Promise<number>, want: number, timeoutMs: number, progress: Progress, abort: () => boolean): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await count();
    if (n < 0) { progress.done(); return false; }
    progress.update(`workers ready ${n}/${want}`);
    if (n >= want) { progress.done(); return true; }
    if (abort() || Date.now() > deadline) { progress.done(); return false; }
    await new Promise((r) => setTimeout(r, 20));
  }
}

function summary(o: UpOptions, model: ChosenModel, hub: HubFile, dir: string, ms: number, detached: boolean): void {
  const driver = o.engine === 'shared' ? 'llama-server' : engineDriver(o.engine, o.driver, {}, 1, 1).driver;
  const procs = supervisedProcesses(o.agents, driver, o.procs, o.engine === 'shared');
  const s = {
    ready: true, agents: o.agents, worker_processes: procs, ready_ms: Math.round(ms), driver, engine: effectiveEngine(o), failover: o.failover, model: model.path ?? null, demo_model: model.demo, detached,
    hub: `${hub.host}:${hub.port}`, hub_pid: hub.pid, control: `http://${hub.control.host}:${hub.control.port}`, state_dir: dir,
  };
  if (o.json) { process.stdout.write(JSON.stringify(s) + '\n'); return; }
  process.stdout.write([
    `swarm up: ${o.agents} agent(s) in ${procs} worker process(es) ready in ${(ms / 1000).toFixed(2)} s`,
    `  hub      ${s.hub} (pid ${hub.pid})`,
    `  control  ${s.control}`,
    o.engine === 'shared' ? `  engine   shared: one llama-server with ${o.agents * o.slots} slots`
      : s.driver === 'batched' ? `  engine   batched: one llama.cpp engine, a sequence for each of ${o.agents * o.slots} slots` : `  driver   ${o.driver}${procs === o.agents && o.agents > 1 ? ' (a process per agent)' : ''}`,
    ...(model.path ? [`  model    ${model.path}${model.demo ? ' (demo: random weights, its text is noise)' : ''}`] : []),
    `  failover ${o.failover ? 'on: if the hub dies, the workers finish the run by gossip (--no-failover to turn off)' : 'off'}`,
    `  state    ${dir}`,
    `next: swarm submit "hello" --wait · swarm status · swarm down`,
    '',
  ].join('\n'));
}

/** The engine the workers really run: batched applies to the default llama.cpp driver only. */
function effectiveEngine(o: UpOptions): EngineMode {
  if (o.engine === 'shared') return 'shared';
  return engineDriver(o.engine, o.driver, {}, 1, 1).driver === 'batched' ? 'batched' : 'per-worker';
}

function readTail(file: string): string {
  try { return fs.readFileSync(file, 'utf8').split('\n').slice(-12).join('\n').trim(); } catch { return ''; }
}
