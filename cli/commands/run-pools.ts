import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SwarmError } from '../../protocol/errors.js';
import { writePidFile } from '../../hub/proc-id.js';
import type { Experiment } from '../../topologies/index.js';
import { call } from '../http.js';
import { logPath } from '../run-hub.js';
import { Progress } from '../progress.js';
import { nodeArgs } from '../node-args.js';
import type { HubFile } from '../state.js';
import { startProcess } from '../../drivers/lifecycle.js';

const CLI = fileURLToPath(new URL('../main.js', import.meta.url));

/**
 * Workers for the roles that share one (driver, model): `swarm run` starts one pool per distinct
 * pair, so a mixed-model experiment runs each role on its own model. `cap` is the capability that
 * routes the pool's roles to it (empty when the experiment has one pool: any worker takes any task).
 */
export interface Pool {
  driver: string;
  model?: string;
  roles: string[];
  agents: number;
  cap?: string;
  /** What the pool's workers advertise: its cap plus the caps its roles ask for. */
  caps: string[];
}

/**
 * Group the experiment's roles by (driver, model). A role naming neither gets the defaults (the
 * first driver and model any role names). `modelOf` resolves a role's model path (relative to the
 * experiment file, or the passport's path on a replay). `agents`, when given, is shared out by the
 * pools' sizes (at least one each).
 */
export function planPools(e: Experiment, modelOf: (role: string) => string | undefined, defaults: { driver?: string; model?: string }, agents?: number): Pool[] {
  const byKey = new Map<string, Pool>();
  for (const [role, r] of Object.entries(e.roles)) {
    const driver = r.driver ?? defaults.driver ?? 'echo';
    const model = modelOf(role) ?? defaults.model;
    const key = `${driver}\u0000${model ?? ''}`;
    const p = byKey.get(key) ?? { driver, model, roles: [], agents: 0, caps: [] };
    p.roles.push(role);
    p.agents += r.agents;
    for (const c of r.caps ?? []) if (!p.caps.includes(c)) p.caps.push(c);
    byKey.set(key, p);
  }
  const pools = [...byKey.values()];
  if (pools.length > 1) {
    const taken = new Set<string>();
    for (const p of pools) {
      // Readable and the same on every run of the experiment, so a later run finds the pool again.
      const base = `pool:${p.driver}:${p.model ? path.basename(p.model) : 'default'}`;
      let cap = base;
      for (let i = 2; taken.has(cap); i++) cap = `${base}~${i}`;
      taken.add(cap);
      p.cap = cap;
      p.caps.unshift(cap);
    }
  }
  const total = pools.reduce((s, p) => s + p.agents, 0);
  for (const p of pools) {
    p.agents = agents !== undefined ? Math.max(1, Math.round((agents * p.agents) / Math.max(1, total))) : Math.max(1, Math.min(64, p.agents));
  }
  return pools;
}

/** The experiment with each role routed to its pool (its pool's cap added to the role's caps). */
export function routeRoles(e: Experiment, pools: Pool[]): Experiment {
  if (pools.every((p) => !p.cap)) return e;
  const out = JSON.parse(JSON.stringify(e)) as Experiment;
  for (const p of pools) {
    for (const role of p.roles) {
      const r = out.roles[role]!;
      if (!(r.caps ?? []).includes(p.cap!)) r.caps = [...(r.caps ?? []), p.cap!];
    }
  }
  return out;
}

/**
 * Start the pools after the first (which `swarm up` started with the hub): one `swarm worker
 * --count N` process each, detached, its pid in `<state-dir>/pids/pool-<i>.pid` so `swarm down`
 * stops it (the hub's KILL at shutdown stops it first). Waits until every worker has joined.
 */
export async function startPools(dir: string, hub: HubFile, pools: Pool[], o: { json: boolean; timeoutMs?: number }): Promise<void> {
  fs.mkdirSync(path.join(dir, 'pids'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'logs'), { recursive: true, mode: 0o700 });
  const want = pools.reduce((s, p) => s + p.agents, 0) + (await workerCount(hub));
  pools.forEach((p, i) => {
    const name = `pool-${i + 2}`;
    const args = [CLI, 'worker', '--state-dir', dir, '--count', String(p.agents), '--driver', p.driver, '--id', `${name}-${process.pid}`,
      '--log-file', logPath(dir, name), ...(p.model ? ['--model', p.model] : []), ...(p.caps.length ? ['--caps', p.caps.join(',')] : []),
      // As the first pool (swarm up's default): in gossip mode the coordinator routes a role to its pool.
      '--failover'];
    if (!o.json) process.stderr.write(`starting ${p.agents} worker(s) for ${p.roles.join(', ')}: ${p.driver}${p.model ? ` ${p.model}` : ''} (caps ${p.caps.join(',')})\n`);
    const argv = [...process.execArgv, ...nodeArgs(), ...args];
    const child = startProcess(process.execPath, argv, { stdio: 'ignore' });
    child.unref();
    if (child.pid) writePidFile(path.join(dir, 'pids', `${name}.pid`), child.pid, [process.execPath, ...argv]);
  });
  const progress = new Progress(o.json);
  const deadline = Date.now() + (o.timeoutMs ?? 180_000);
  for (;;) {
    const n = await workerCount(hub);
    progress.update(`workers ready ${n}/${want}`);
    if (n >= want) { progress.done(); return; }
    if (Date.now() > deadline) {
      progress.done();
      throw new SwarmError('SWARM_ERR_TIMEOUT', `only ${n}/${want} workers joined; see ${path.join(dir, 'logs')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Capabilities the running swarm's workers advertise, and how many workers there are. */
export async function workerCaps(hub: HubFile): Promise<Set<string>> {
  const s = await call<{ workers: { caps?: string[] }[] }>(hub, 'GET', '/status', undefined, 5000).catch(() => ({ workers: [] }));
  return new Set(s.workers.flatMap((w) => w.caps ?? []));
}

async function workerCount(hub: HubFile): Promise<number> {
  const s = await call<{ workers: unknown[] }>(hub, 'GET', '/status', undefined, 5000).catch(() => ({ workers: [] }));
  return s.workers.length;
}

/** What the running swarm's supervised workers were started with (hub /status), when it says. */
export interface RunningEngine { driver?: string; model?: string; driver_opt: Record<string, string> }

/** The embedded engine runs as `batched` (one engine, many sequences) or behind a shared llama-server. */
function sameDriver(asked: string, running: string | undefined): boolean {
  return asked === running || (asked === 'embedded' && (running === 'batched' || running === 'llama-server'));
}

/**
 * Refuse a run whose --driver, --model or --driver-opt differ from what the running swarm runs (a
 * run on p=0.6 workers asked for p=0.95 would silently answer at 0.6). Returns what the swarm runs,
 * for the passport; undefined when the hub does not say (then any of those flags is refused too).
 */
export async function checkEngine(dir: string, hub: HubFile, o: { driver?: string; model?: string; driverOpt: Record<string, string> }): Promise<RunningEngine | undefined> {
  const s = await call<{ workers_engine?: RunningEngine }>(hub, 'GET', '/status', undefined, 5000).catch(() => ({ workers_engine: undefined }));
  const running = s.workers_engine;
  const asked = Object.keys(o.driverOpt).length || o.driver || o.model;
  if (!asked) return running;
  const stop = `stop it (swarm down --state-dir ${dir}) and run again to start one as asked, or give another --state-dir`;
  if (!running) throw new SwarmError('SWARM_ERR_CONFIG', `the swarm running in ${dir} does not say which driver, model and driver options its workers run, so --driver/--model/--driver-opt cannot be honoured on it: ${stop}`);
  const diff: string[] = [];
  if (o.driver && !sameDriver(o.driver, running.driver)) diff.push(`driver ${o.driver} (it runs ${running.driver ?? 'unknown'})`);
  if (o.model && path.resolve(o.model) !== running.model) diff.push(`model ${path.resolve(o.model)} (it runs ${running.model ?? 'no model'})`);
  for (const [k, v] of Object.entries(o.driverOpt)) if (running.driver_opt[k] !== v) diff.push(`--driver-opt ${k}=${v} (it runs ${running.driver_opt[k] === undefined ? `without ${k}` : `${k}=${running.driver_opt[k]}`})`);
  if (diff.length) throw new SwarmError('SWARM_ERR_CONFIG', `this run asks for ${diff.join(', ')}, which the swarm running in ${dir} does not run: ${stop}`);
  return running;
}
