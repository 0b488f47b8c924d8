import { SwarmError } from '../../protocol/index.js';

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

function num(o: Record<string, string>, key: string, def: number | undefined, min: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new SwarmError('SWARM_ERR_CONFIG', `llama-server option ${key} must be an integer >= ${min}, got "${v}"`);
  return n;
}

const KNOWN = new Set(['url', 'slots', 'np', 'ctx', 'threads', 'start_timeout_ms', 'stop_grace_ms', 'bin', 'args', 'slot']);

/** Validate the string options of DriverConfig into typed settings. */
export function parseLlamaServerOptions(o: Record<string, string>): LlamaServerOptions {
  for (const k of Object.keys(o)) if (!KNOWN.has(k)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown llama-server option "${k}" (known: ${[...KNOWN].join(', ')})`);
  const slots = num(o, 'slots', undefined, 1) ?? num(o, 'np', 1, 1)!;
  const url = o.url?.replace(/\/+$/, '');
  if (url !== undefined) {
    let u: URL;
    try { u = new URL(url); } catch { throw new SwarmError('SWARM_ERR_CONFIG', `llama-server option url is not a URL: "${o.url}"`); }
    if (u.protocol !== 'http:') throw new SwarmError('SWARM_ERR_CONFIG', `llama-server url must be http://, got "${o.url}"`);
  }
  // One thread per engine unless told: several engines on a small VPS each taking every core is slower
  // than one each (measured here: 120 vs 3.3 tokens/s on the 110M shape, bench/engines.ts).
  const threads = num(o, 'threads', 1, 1);
  return {
    ...(url !== undefined ? { url } : {}),
    slots,
    // 2048 tokens per slot unless told; the server divides -c among its slots.
    ctx: num(o, 'ctx', 2048 * slots, 0)!,
    ...(threads !== undefined ? { threads } : {}),
    startTimeoutMs: num(o, 'start_timeout_ms', 120_000, 100)!,
    stopGraceMs: num(o, 'stop_grace_ms', 3000, 0)!,
    ...(o.bin ? { bin: o.bin } : {}),
    args: (o.args ?? '').split(/\s+/).filter(Boolean),
    ...(o.slot !== undefined && o.slot !== '' ? { slot: num(o, 'slot', 0, 0)! } : {}),
  };
}
