import { SwarmError } from '../../protocol/index.js';
import { intOption } from '../options.js';

/** Settings of the embedded driver, from `--driver-opt k=v` (DriverConfig.options). */
export interface EmbeddedOptions {
  /** CPU threads for generation; 1 was faster than 2 on the 2-core test machine. */
  threads: number;
  /** Context size in tokens (capped at the model's training context). */
  ctx: number;
  /** Parallel sequences in the engine: chats beyond this wait for a free one. */
  slots: number;
  /** How long the engine may take to load node-llama-cpp and the model. */
  startTimeoutMs: number;
  /** SIGTERM-to-SIGKILL grace on stop. */
  stopGraceMs: number;
  /** An `hf:` download fails when no bytes arrive for this long (offline, stalled). */
  downloadStallMs: number;
}

const num = (o: Record<string, string>, key: string, def: number, min: number): number => intOption('embedded', o, key, def, min);

const KNOWN = new Set(['threads', 'ctx', 'slots', 'start_timeout_ms', 'stop_grace_ms', 'download_stall_ms']);

/** Validate the string options of DriverConfig into typed settings. */
export function parseEmbeddedOptions(o: Record<string, string>): EmbeddedOptions {
  for (const k of Object.keys(o)) if (!KNOWN.has(k)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown embedded option "${k}" (known: ${[...KNOWN].join(', ')})`);
  return {
    threads: num(o, 'threads', 1, 1),
    ctx: num(o, 'ctx', 2048, 16),
    slots: num(o, 'slots', 1, 1),
    startTimeoutMs: num(o, 'start_timeout_ms', 60_000, 100),
    stopGraceMs: num(o, 'stop_grace_ms', 3000, 0),
    downloadStallMs: num(o, 'download_stall_ms', 30_000, 100),
  };
}
