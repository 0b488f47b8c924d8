import os from 'node:os';
import { InvalidArgumentError } from 'commander';
import { SwarmError } from '../protocol/index.js';

/** How the workers of one host run their model. */
export type EngineMode = 'per-worker' | 'shared';

/** commander parser for `--engine`. */
export function parseEngineMode(v: string): EngineMode {
  if (v === 'per-worker' || v === 'shared') return v;
  throw new InvalidArgumentError(`--engine must be per-worker or shared, got "${v}"`);
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
