import { driverOptions } from '../options.js';

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
  /** Flash attention: `auto` decides as the batched engine does (drivers/batched/flash-attn.ts), for a KV stream per slot. */
  flashAttn: 'auto' | 'on' | 'off';
}

/** Validate the string options of DriverConfig into typed settings. */
export function parseEmbeddedOptions(raw: Record<string, string>): EmbeddedOptions {
  const o = driverOptions<'embedded'>('embedded', raw);
  return { threads: o.threads, ctx: o.ctx, slots: o.slots, startTimeoutMs: o.start_timeout_ms, stopGraceMs: o.stop_grace_ms, downloadStallMs: o.download_stall_ms, flashAttn: o.flash_attn };
}
