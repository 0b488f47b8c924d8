import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Experiment } from './schema.js';
import { findSelfBuiltAddon } from '../drivers/llama-build/addon-paths.js';

/** What makes a run reproducible and comparable: versions, model identity, config, seed, host. */
export interface Passport {
  run: string;
  created_at: string;
  swarm_version: string;
  experiment: string;
  topology: string;
  seed: number;
  temperature: number;
  models: { role: string; path: string; sha256?: string; size?: number; error?: string }[];
  drivers: { role: string; driver: string }[];
  /** The driver options the swarm's workers run with (`--driver-opt`): p of the simulated driver, ctx, threads… */
  driver_options?: Record<string, string>;
  engines: Record<string, string>;
  host: { hostname: string; platform: string; arch: string; cpus: number; cpu_model: string; mem_bytes: number; node: string };
  /** The resolved experiment (role defaults filled in). */
  config: Experiment;
  replay_of?: string;
}

const hashes = new Map<string, { key: string; sha256: string }>();

/** sha256 of a file, cached by path, size and mtime (models are large and rarely change). */
export async function fileSha256(file: string): Promise<{ sha256: string; size: number }> {
  const st = await fs.promises.stat(file);
  const key = `${st.size}:${st.mtimeMs}`;
  const hit = hashes.get(file);
  if (hit?.key === key) return { sha256: hit.sha256, size: st.size };
  const h = crypto.createHash('sha256');
  for await (const c of fs.createReadStream(file)) h.update(c as Buffer);
  const sha256 = h.digest('hex');
  hashes.set(file, { key, sha256 });
  return { sha256, size: st.size };
}

/** Versions of engines this process can see (node-llama-cpp), plus what the caller knows. */
function engineVersions(extra: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { ...extra };
  try {
    const require = createRequire(import.meta.url);
    const pkg = require('node-llama-cpp/package.json') as { version?: string };
    if (pkg.version) out['node-llama-cpp'] = pkg.version;
    // Which binding a batched engine on this host loads: the self-built one runs a unified KV cache.
    const own = findSelfBuiltAddon();
    out['node-llama-cpp-addon'] = own ? `self-built, llama.cpp ${own.info.source}, unified KV cache (${own.addon})` : 'prebuilt';
  } catch { /* not installed */ }
  return out;
}

export async function makePassport(o: {
  run: string; experiment: Experiment; swarmVersion: string; baseDir?: string; defaultModel?: string; defaultDriver?: string;
  engines?: Record<string, string>; replayOf?: string; driverOptions?: Record<string, string>;
}): Promise<Passport> {
  const e = o.experiment;
  const models: Passport['models'] = [];
  const drivers: Passport['drivers'] = [];
  for (const [role, r] of Object.entries(e.roles)) {
    const model = r.model ?? o.defaultModel;
    if (model) {
      const p = path.resolve(o.baseDir ?? process.cwd(), model);
      try { models.push({ role, path: p, ...(await fileSha256(p)) }); } catch (err) { models.push({ role, path: p, error: (err as Error).message }); }
    }
    const driver = r.driver ?? o.defaultDriver;
    if (driver) drivers.push({ role, driver });
  }
  return {
    run: o.run, created_at: new Date().toISOString(), swarm_version: o.swarmVersion, experiment: e.name, topology: e.topology,
    seed: e.seed, temperature: e.temperature, models, drivers, ...(o.driverOptions ? { driver_options: { ...o.driverOptions } } : {}), engines: engineVersions(o.engines ?? {}),
    host: {
      hostname: os.hostname(), platform: os.platform(), arch: os.arch(), cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? '',
      mem_bytes: os.totalmem(), node: process.version,
    },
    config: e,
    ...(o.replayOf ? { replay_of: o.replayOf } : {}),
  };
}
