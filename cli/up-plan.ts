import { SwarmError } from '../protocol/errors.js';
import { formatBytes } from '../protocol/bytes.js';
import type { EngineMode } from './shared-engine.js';
import type { Procs } from './procs.js';

// Apart from cli/commands/plan.ts, whose static imports (the planner, GGUF reading) `swarm up`
// would load at every start: here the planner loads only for a driver it plans.

/** Drivers whose agents hold a model, so that `swarm plan` can say how many fit. */
const PLANNED_DRIVERS = new Set(['embedded', 'batched', 'llama-server', 'llama-cli']);

/** The context per agent `swarm up` plans for when --driver-opt ctx is not given (the drivers' default). */
const PLAN_CTX = 2048;

/**
 * `swarm up`'s memory check: more agents than `swarm plan` says fit on this machine are refused with
 * the plan's figure (`--force` starts them anyway). The refusal and the plan's bound, or undefined.
 */
export async function planRefusal(o: { model?: string; driver: string; engine: EngineMode; agents: number; slots: number; ctx?: string; procs: Procs }): Promise<{ max: number; error: SwarmError } | undefined> {
  if (!o.model || (!PLANNED_DRIVERS.has(o.driver) && o.engine !== 'shared')) return undefined;
  const engine: EngineMode = o.engine === 'shared' ? 'shared' : o.driver === 'batched' ? 'batched' : o.engine === 'batched' && o.driver === 'embedded' ? 'batched' : 'per-worker';
  const ctx = (o.ctx !== undefined && Number(o.ctx) > 0 ? Number(o.ctx) : PLAN_CTX) * Math.max(1, o.slots);
  const { beyondPlan } = await import('../deploy/plan/index.js');
  const p = await beyondPlan({ model: o.model, agents: o.agents, engine, ctx, procs: o.procs });
  if (!p) return undefined;
  return { max: p.maxAgents, error: new SwarmError('SWARM_ERR_CONFIG', `--agents ${o.agents}: at most ${p.maxAgents} agents of this model fit in this machine's ${formatBytes(p.options.ramBytes)} (${engine} engine, ctx ${ctx}; ${o.agents} need ${formatBytes(p.memory.total)}); \`swarm plan --agents ${o.agents} --model ${o.model} --engine ${engine}\` shows the arithmetic. --force starts them anyway`) };
}
