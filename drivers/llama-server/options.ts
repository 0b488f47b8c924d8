import { SwarmError } from '../../protocol/index.js';
import { driverOptions } from '../options.js';

/** Settings of the llama-server driver, from `--driver-opt k=v` (DriverConfig.options). */
export interface LlamaServerOptions {
  /** Shared mode: an already running llama-server (http://127.0.0.1:PORT); the driver spawns nothing. */
  url?: string;
  /** Parallel sequences (`-np`); a shared engine is sized for the workers that use it. */
  slots: number;
  /** Total context (`-c`), split across slots by llama-server. */
  ctx: number;
  /** CPU threads (`-t`); default 1 per engine. */
  threads?: number;
  /** How long to wait for /health to be ok. */
  startTimeoutMs: number;
  /** SIGTERM-to-SIGKILL grace on stop. */
  stopGraceMs: number;
  /** Path of llama-server (default: findLlamaBinary). */
  bin?: string;
  /** Extra command-line arguments, space separated (e.g. `--no-repack`). */
  args: string[];
  /** Shared mode: the server slot this worker's requests go to (`id_slot`), so its prompt cache is this worker's last prompt. */
  slot?: number;
}

/** Validate the string options of DriverConfig into typed settings. */
export function parseLlamaServerOptions(raw: Record<string, string>): LlamaServerOptions {
  const o = driverOptions<'llamaServer'>('llama-server', raw);
  const slots = o.slots ?? o.np ?? 1;
  const url = o.url?.replace(/\/+$/, '');
  if (url !== undefined) {
    let u: URL;
    try { u = new URL(url); } catch { throw new SwarmError('SWARM_ERR_CONFIG', `llama-server option url is not a URL: "${o.url}"`); }
    if (u.protocol !== 'http:') throw new SwarmError('SWARM_ERR_CONFIG', `llama-server url must be http://, got "${o.url}"`);
  }
  return {
    ...(url !== undefined ? { url } : {}),
    slots,
    // 2048 tokens per slot unless told; the server divides -c among its slots.
    ctx: o.ctx ?? 2048 * slots,
    // One thread per engine unless told (the schema's default): several engines on a small VPS each
    // taking every core is slower than one each (measured here: 120 vs 3.3 tokens/s on the 110M shape, bench/engines.ts).
    threads: o.threads,
    startTimeoutMs: o.start_timeout_ms,
    stopGraceMs: o.stop_grace_ms,
    ...(o.bin ? { bin: o.bin } : {}),
    args: (o.args ?? '').split(/\s+/).filter(Boolean),
    ...(o.slot !== undefined ? { slot: o.slot } : {}),
  };
}
