import crypto from 'node:crypto';
import path from 'node:path';
import type { Experiment } from '../../topologies/index.js';
import { fileSha256 } from '../../topologies/passport.js';
import type { RunningEngine } from './run-pools.js';

/** What a cell's result depends on besides its experiment: the engine it runs on. */
export interface EngineIdentity { driver?: string; driver_opt: Record<string, string>; model?: string }

/** Options that size an engine without changing an answer. */
const SIZING = new Set(['sequences', 'threads', 'ctx', 'batch']);

/**
 * The engine a sweep's cells run on: the flags given, else what the running swarm runs. The
 * embedded engine counts as one driver however it runs (per worker, batched, behind llama-server).
 */
export function engineIdentity(o: { driver?: string; model?: string; driverOpt: Record<string, string> }, running: RunningEngine | undefined, fallbackDriver: string | undefined, fallbackModel?: string): EngineIdentity {
  const driver = o.driver ?? running?.driver ?? fallbackDriver;
  const opts = { ...(running?.driver_opt ?? {}), ...o.driverOpt };
  const driver_opt = Object.fromEntries(Object.entries(opts).filter(([k]) => !SIZING.has(k) && k !== 'url').sort(([a], [b]) => a.localeCompare(b)));
  const model = o.model ? path.resolve(o.model) : running?.model ?? fallbackModel;
  return { driver: driver === 'batched' || driver === 'llama-server' ? 'embedded' : driver, driver_opt, ...(model ? { model } : {}) };
}

/** JSON with sorted keys: the same value always hashes the same. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/**
 * A cell's identity: sha256 over the fully resolved experiment (the YAML after every --set and the
 * cell's own, seed included), the engine (driver, its options) and the sha256 of every model and of
 * the dataset file. A cell is reused only when its hash is the same: any change re-runs it.
 */
export async function cellHash(e: Experiment, engine: EngineIdentity, baseDir: string): Promise<{ hash: string; dataset_sha256?: string; models: Record<string, string> }> {
  const models: Record<string, string> = {};
  const paths = new Set<string>(Object.values(e.roles).map((r) => r.model).filter((m): m is string => !!m));
  if (!paths.size && engine.model) paths.add(engine.model);
  for (const m of [...paths].sort()) models[m] = (await fileSha256(path.resolve(baseDir, m))).sha256;
  const dataset = e.inputs.dataset ? (await fileSha256(path.resolve(baseDir, e.inputs.dataset))).sha256 : undefined;
  const { model: _m, ...eng } = engine;
  const hash = crypto.createHash('sha256').update(canonical({ experiment: e, engine: eng, models: Object.values(models), dataset })).digest('hex');
  return { hash, ...(dataset ? { dataset_sha256: dataset } : {}), models };
}
