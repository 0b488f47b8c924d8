/**
 * The capacity check of `swarm up`: the agents asked for against what `swarm plan` says fits on this
 * machine. Without it `up --agents 100000` started 28 processes of 1,000 agents each, took 1.4 GB and
 * the machine's CPU for half a minute, and `swarm down` needed 86 s to undo it.
 */
import fs from 'node:fs';
import os from 'node:os';
import type { Procs } from '../../cli/procs.js';
import { plan, type EngineMode, type Plan } from './estimate.js';
import { readModelShape } from './gguf.js';

/** This machine's memory for the plan: the cgroup's limit where one is set below the RAM (a container). */
export function machineRam(): number {
  const total = os.totalmem();
  for (const f of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      const v = Number(fs.readFileSync(f, 'utf8').trim());
      if (Number.isFinite(v) && v > 0 && v < total) return v;
    } catch { /* no such controller */ }
  }
  return total;
}

/** What the check found: undefined when the agents fit (or no plan can be made: no GGUF header to read). */
export async function beyondPlan(o: { model: string; agents: number; engine: EngineMode; ctx?: number; procs?: Procs }): Promise<Plan | undefined> {
  let shape;
  // A header that does not parse is the engine's to report (with its own message), not the plan's.
  try { shape = await readModelShape(o.model); } catch { return undefined; }
  const p = plan(shape, { agents: o.agents, ramBytes: machineRam(), cpus: os.availableParallelism(), engine: o.engine, ctx: o.ctx, procs: o.procs });
  return p.fits ? undefined : p;
}
