import os from 'node:os';
import { InvalidArgumentError } from 'commander';
import { SwarmError } from '../protocol/errors.js';

/**
 * How the workers of one host run their model: `batched`, one node-llama-cpp engine per (host, model)
 * with a sequence per worker (no compile, continuous batching); `per-worker`, an engine per worker
 * (full isolation); `shared`, one llama-server -np N (`llama-server` is the same; needs `swarm engine build`).
 */
export type EngineMode = 'batched' | 'per-worker' | 'shared';

/**
 * The engine of `swarm up`, `swarm hub --supervise` and `swarm run` when none is given. Batched, by
 * measurement against the per-worker engines (README, Engines; quiet machine, 110M shape, each as a
 * fraction of the best bare llama-server of the same run): 0.72-0.75x against 0.54-0.65x at 8 agents,
 * 0.95x against 0.44x at 25; 19 MB per extra agent beyond its KV cache against ~60; 25 agents all
 * answering 3.5-3.8 s after `swarm up` against 11-12 s. Per-worker keeps full isolation (`--engine per-worker`).
 * It applies to the llama.cpp driver only (`embedded`); echo, exec and the other drivers keep a worker each.
 */
export const DEFAULT_ENGINE: EngineMode = 'batched';

/** commander parser for `--engine`. */
export function parseEngineMode(v: string): EngineMode {
  if (v === 'per-worker' || v === 'shared' || v === 'batched') return v;
  if (v === 'llama-server') return 'shared';
  throw new InvalidArgumentError(`--engine must be batched, per-worker or llama-server (shared), got "${v}"`);
}

/**
 * The driver supervised workers run for an engine mode. The default llama.cpp driver (`embedded`)
 * becomes the batched driver in batched mode, and the batched driver, asked for by name, keeps it:
 * either way its one engine gets a sequence for every slot of every supervised worker. A connection
 * holds its sequence for life and one past them waits for a free one, so with fewer sequences the
 * extra workers would hold their first task forever: that is refused here. Another driver (echo,
 * exec, …) is left as given.
 */
export function engineDriver(mode: EngineMode, driver: string, driverOpt: Record<string, string>, agents: number, slots: number): { driver: string; driverOpt: Record<string, string> } {
  const batched = driver === 'batched' || (mode === 'batched' && driver === 'embedded');
  if (!batched) return { driver, driverOpt };
  const need = Math.max(1, agents * slots);
  if (driverOpt.sequences !== undefined && Number(driverOpt.sequences) < need) {
    throw new SwarmError('SWARM_ERR_CONFIG', `--driver-opt sequences=${driverOpt.sequences} is fewer than the ${agents} worker(s) x ${slots} slot(s) sharing the batched engine (${need}); each worker holds a sequence, so the rest would wait for one forever`);
  }
  return { driver: 'batched', driverOpt: { sequences: String(need), ...driverOpt } };
}

/** One llama-server the hub owns, with a slot per worker slot (continuous batching). */
export interface SharedEngine { url: string; pid?: number; stop(): Promise<void> }

/**
 * Start the shared engine: `llama-server -np <slots>` on a free loopback port, all threads of the
 * host (it is the only engine). Workers reach it with `--driver llama-server --driver-opt url=…`.
 */
export async function startSharedEngine(o: { model?: string; slots: number; threads?: number; ctxPerSlot?: number }): Promise<SharedEngine> {
  if (!o.model) throw new SwarmError('SWARM_ERR_CONFIG', '--engine shared needs a model (--model PATH.gguf, SWARM_MODEL, or the demo model)');
  const options: Record<string, string> = {
    slots: String(o.slots), threads: String(o.threads ?? os.cpus().length), ctx: String((o.ctxPerSlot ?? 2048) * o.slots),
  };
  const { LlamaServerDriver } = await import('../drivers/llama-server/index.js'); // only a hub with --engine shared needs it
  const d = new LlamaServerDriver({ name: 'llama-server', model: o.model, options });
  await d.start();
  return { url: d.url!, pid: d.pids()[0], stop: () => d.stop() };
}

/** Worker arguments that point at a shared engine. */
export function sharedWorkerArgs(url: string, slots: number): string[] {
  return ['--driver', 'llama-server', '--driver-opt', `url=${url}`, '--slots', String(slots)];
}
