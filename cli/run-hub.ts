import fs from 'node:fs';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { SwarmError, peerSecret, workerCredential } from '../protocol/index.js';
import { ControlServer, Hub, RESPAWN_DELAY_MS, Supervisor, hubConfig, isLoopback, procStart, workerNice, type HubConfig } from '../hub/index.js';
import { pidNamespace } from '../protocol/proc-stat.js';
import { hubAnswers, hubIsOurs, hubUnseen } from './running.js';
import { VERSION, readHubFile, removeHubFile, writeHubFile, type HubFile } from './state.js';
export { logPath, newToken } from './state.js';
import { sharedWorkerArgs, startSharedEngine, type SharedEngine } from './shared-engine.js';
import { StateDirGuard } from './state-guard.js';
import { lockStateDir, type StateLock } from './state-lock.js';
import { AWAIT_DOWN_MS, lockAfterDown } from './stopping.js';
import { nodeArgs } from './node-args.js';
import { groupIds, supervisedProcesses, type Procs } from './procs.js';
import { describeEngines, runningEngines } from '../drivers/batched/engine-info.js';

export interface RunHubOptions {
  dir: string;
  log: Logger;
  config: Omit<Parameters<typeof hubConfig>[0], 'stateDir'>;
  /** Supervise this many workers (agents). */
  agents?: number;
  /** In how many processes (cli/procs.ts; default auto: by driver). */
  procs?: Procs;
  workerArgs?: string[];
  journal?: boolean;
  /** Run one shared llama-server for the supervised workers instead of an engine each. */
  sharedEngine?: { model?: string; slotsPerWorker: number };
  /**
   * A hub started on its own (not by `swarm up`, which waited already): first wait while a `swarm down`
   * stops the swarm in `dir` (cli/stopping.ts `lockAfterDown`), told once with that `down`'s pid.
   */
  awaitDown?: (pid: number | undefined) => void;
}

export interface RunningHub {
  hub: Hub;
  control: ControlServer;
  supervisor?: Supervisor;
  file: HubFile;
  stop(workers?: 'all' | 'supervised'): Promise<void>;
  stopped: Promise<void>;
}

const CLI = fileURLToPath(new URL('./main.js', import.meta.url));

/** Start a hub (and optionally its workers) on a state directory, and write hub.json. */
export async function runHub(o: RunHubOptions): Promise<RunningHub> {
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  // Held until this hub stops: a second hub started at the same moment is refused here.
  let lock = await lockStateDir(o.dir);
  if (o.awaitDown) lock = await lockAfterDown(o.dir, lock, AWAIT_DOWN_MS, o.awaitDown);
  try {
    return await startHub(o, lock);
  } catch (err) { lock?.release(); throw err; }
}

async function startHub(o: RunHubOptions, lock: StateLock | undefined): Promise<RunningHub> {
  const prev = readHubFile(o.dir);
  if (prev && ((prev.pid !== process.pid && hubIsOurs(prev, o.dir)) || (hubUnseen(prev) && await hubAnswers(prev)))) {
    throw new SwarmError('SWARM_ERR_ALREADY_RUNNING', `a swarm (hub pid ${prev.pid}) is already running in ${o.dir}; \`swarm down\` stops it`);
  }
  // Checked before anything starts: a bad value is a usage error, not a hub left half up.
  const nice = o.agents ? workerNice() : 0;
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  let config: HubConfig;
  // A restarted hub takes the port it had, so workers given HOST:PORT find it again.
  const port = o.config.port || prev?.port || 0;
  const controlPort = o.config.controlPort || prev?.control.port || 0;
  config = hubConfig({ ...o.config, port, controlPort, stateDir: o.journal === false ? undefined : o.dir });
  let supervisor: Supervisor | undefined;
  // A dropped link starts the supervisor's reconnect grace; the worker's return calls it off.
  const events = { workerDown: (id: string) => supervisor?.declareDead(id), workerUp: (w: { id: string }) => supervisor?.connected(w.id) };
  let hub = new Hub(config, o.log, events);
  let addr;
  try { addr = await hub.start(); } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || o.config.port) throw wrapListen(err, config.host, config.port);
    config = hubConfig({ ...o.config, port: 0, controlPort: 0, stateDir: config.stateDir });
    hub = new Hub(config, o.log, events);
    addr = await hub.start();
  }
  let engine: SharedEngine | undefined;
  let stopping: Promise<void> | undefined;
  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  let guard: StateDirGuard | undefined;
  /**
   * A signal or a restart stops what this hub supervises here, nothing more: workers started apart
   * (other hosts, other units) keep running and rejoin the next hub. `swarm down` asks for `all`.
   */
  const stop = (workers: 'all' | 'supervised' = 'supervised'): Promise<void> => {
    stopping ??= (async () => {
      guard?.stop();
      o.log.info({ workers }, 'hub shutting down');
      const ours = (id: string): boolean => supervisor?.runs(id) ?? false;
      await Promise.all([hub.stop({ killWorkers: workers === 'all' ? true : ours, graceMs: 3000 }), supervisor?.stop()]);
      await engine?.stop();
      await control.stop();
      removeHubFile(o.dir, process.pid);
      lock?.release();
      o.log.flush?.();
      resolveStopped();
    })();
    return stopping;
  };
  // Off loopback the control API speaks HTTPS with the hub's certificate (hubConfig refuses it without one).
  const controlTls = !isLoopback(config.controlHost) && config.tlsCert && config.tlsKey
    ? { cert: fs.readFileSync(config.tlsCert), key: fs.readFileSync(config.tlsKey) } : undefined;
  const controlOpts = {
    host: config.controlHost, port: controlPort, token: config.token, tls: controlTls,
    status: () => ({
      state_dir: o.dir, agents_wanted: o.agents ?? 0, supervised_pids: supervisor?.pids() ?? [],
      engine: { ...(engine ? { mode: 'shared', url: engine.url, pid: engine.pid } : { mode: engineMode(o.workerArgs ?? []), ...resolvedEngines(o.dir) }), ...engineFailure(hub), ...engineFallbacks(hub) },
      ...(o.workerArgs?.length ? { workers_engine: workersEngine(o.workerArgs) } : {}),
    }),
    onShutdown: (workers: 'all' | 'supervised') => void stop(workers),
  };
  let control = new ControlServer(hub, controlOpts, o.log);
  let caddr;
  try { caddr = await control.start(); } catch (err) {
    if (o.config.controlPort) throw wrapListen(err, config.controlHost, controlPort);
    control = new ControlServer(hub, { ...controlOpts, port: 0 }, o.log);
    caddr = await control.start();
  }
  const file: HubFile = {
    pid: process.pid, host: addr.host, port: addr.port, token: config.token,
    control: controlTls ? { ...caddr, tls: true, ...(config.tlsCa ? { ca_file: config.tlsCa } : { ca_file: config.tlsCert }) } : caddr,
    tls: Boolean(config.tlsCert), ...(config.tlsCert ? { tls_fingerprint: new X509Certificate(fs.readFileSync(config.tlsCert)).fingerprint256 } : {}), started_at: Date.now(), version: VERSION, agents: o.agents, proc_start: procStart(process.pid), ...((ns) => (ns ? { pidns: ns } : {}))(pidNamespace()),
  };
  writeHubFile(o.dir, file);
  guard = new StateDirGuard(o.dir, (why) => {
    o.log.error({ state_dir: o.dir }, `${why}: stopping this swarm (its journal is no longer where a restart reads it, and no CLI can find it)`);
    void stop();
  });
  guard.start();
  let workerArgs = o.workerArgs ?? [];
  if (o.sharedEngine && o.agents && o.agents > 0) {
    try {
      engine = await startSharedEngine({ model: o.sharedEngine.model, slots: o.agents * o.sharedEngine.slotsPerWorker });
    } catch (err) { await stop(); throw err; }
    // A `swarm down` while the engine started found no engine to stop: stop it here.
    if (stopping) await engine.stop();
    else o.log.info({ url: engine.url, pid: engine.pid }, 'shared engine ready');
    workerArgs = [...sharedWorkerArgs(engine.url, o.sharedEngine.slotsPerWorker), ...(workerArgs.includes('--failover') ? ['--failover'] : [])];
  }
  // Stopped already (`swarm down` came while it started): no worker is started after the stop.
  if (o.agents && o.agents > 0 && !stopping) {
    const ids = Array.from({ length: o.agents }, (_, i) => `w-${i + 1}`);
    const groups = groupIds(ids, supervisedProcesses(ids.length, argValue(workerArgs, '--driver'), o.procs ?? 'auto', engine !== undefined));
    supervisor = new Supervisor({
      groups, stateDir: o.dir, reconnectGraceMs: 2 * config.deadAfterMs, isConnected: (id) => hub.registry.get(id) !== undefined, nice,
      command: (group) => ({
        file: process.execPath,
        // A shared llama-server gives each single-slot worker its own server slot (prompt cache affinity).
        // Several in one process: one the hub KILLs starts again in it, as a process of one is respawned.
        args: [...nodeArgs(), CLI, 'worker', ...(group.length === 1 ? ['--id', group[0]!] : ['--ids', group.join(','), '--restart-killed-ms', String(RESPAWN_DELAY_MS)]), '--state-dir', o.dir, ...workerArgs,
          ...(engine && o.sharedEngine?.slotsPerWorker === 1 ? ['--driver-opt', `slot=${ids.indexOf(group[0]!)}`] : [])],
        // Each worker gets its own credential, not the swarm token: it can join as its id only.
        env: config.token ? workerEnv(config.token, group) : process.env,
      }),
    }, o.log.child({ part: 'supervisor' }));
    supervisor.start();
  }
  return { hub, control, supervisor, file, stop, stopped };
}

/**
 * A process's credentials: SWARM_TOKEN for a process of one worker (as a worker started by hand
 * takes it), SWARM_CREDENTIALS (a JSON object, id to credential) for several: each still admits
 * its own id only, so one process's workers cannot join as another process's.
 */
function workerEnv(token: string, ids: string[]): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SWARM_PEER_TOKEN: peerSecret(token) };
  // Never the swarm token itself, which the operator's environment may hold.
  delete env.SWARM_TOKEN;
  delete env.SWARM_CREDENTIALS;
  if (ids.length === 1) env.SWARM_TOKEN = workerCredential(token, ids[0]!);
  else env.SWARM_CREDENTIALS = JSON.stringify(Object.fromEntries(ids.map((id) => [id, workerCredential(token, id)])));
  return env;
}

function argValue(args: string[], name: string): string | undefined {
  const i = args.lastIndexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/** The first engine failure its workers report, and on how many: what `swarm status` shows. */
function engineFailure(hub: Hub): { error?: string; failed_workers?: number } {
  const failed = [...hub.registry.all()].filter((w) => w.engineError !== undefined);
  return failed.length ? { error: `${failed[0]!.id}: ${failed[0]!.engineError}`, failed_workers: failed.length } : {};
}

/**
 * Engines that run other than their first choice (a CPU variant hidden after a SIGILL), as their
 * workers report them: each distinct note with how many workers: what `swarm status` shows.
 */
function engineFallbacks(hub: Hub): { fallbacks?: { note: string; workers: number }[] } {
  const n = new Map<string, number>();
  for (const w of hub.registry.all()) if (w.engineFallback) n.set(w.engineFallback, (n.get(w.engineFallback) ?? 0) + 1);
  return n.size ? { fallbacks: [...n].map(([note, workers]) => ({ note, workers })) } : {};
}

/** The supervised workers' driver, model and driver options: `swarm run` checks what it asks for against them. */
function workersEngine(args: string[]): { driver?: string; model?: string; driver_opt: Record<string, string> } {
  const opts: Record<string, string> = {};
  args.forEach((a, i) => {
    if (a !== '--driver-opt' || args[i + 1] === undefined) return;
    const kv = args[i + 1]!, eq = kv.indexOf('=');
    if (eq > 0) opts[kv.slice(0, eq)] = kv.slice(eq + 1);
  });
  const model = argValue(args, '--model');
  return { driver: argValue(args, '--driver'), ...(model ? { model: path.resolve(model) } : {}), driver_opt: opts };
}

/** What the swarm's batched engines resolved at start (flash attention and why): `swarm status` shows it. */
function resolvedEngines(dir: string | undefined): { resolved?: string[] } {
  const now = Date.now();
  // Read from disk at most once a second once engines run: dashboards and benches poll the status
  // twice a second, on the hub's thread. None yet is read again each time (an engine starting shows at once).
  // Kept per directory: a process may run more than one hub (tests do), each with its own engines.
  if (!engineMemo || engineMemo.dir !== dir || !engineMemo.lines.length || now - engineMemo.at >= 1000) engineMemo = { dir, at: now, lines: dir ? describeEngines(runningEngines(dir)) : [] };
  return engineMemo.lines.length ? { resolved: engineMemo.lines } : {};
}
let engineMemo: { dir: string | undefined; at: number; lines: string[] } | undefined;

/** What the supervised workers' arguments say about their engine. */
function engineMode(args: string[]): 'batched' | 'per-worker' {
  return argValue(args, '--driver') === 'batched' ? 'batched' : 'per-worker';
}

function wrapListen(err: unknown, host: string, port: number): Error {
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'EADDRINUSE') return new SwarmError('SWARM_ERR_CONFIG', `port ${port} on ${host} is in use`);
  if (e.code === 'EADDRNOTAVAIL') return new SwarmError('SWARM_ERR_CONFIG', `cannot bind ${host}: no such local address`);
  return e;
}

