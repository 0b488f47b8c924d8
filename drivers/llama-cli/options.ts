import { SwarmError } from '../../protocol/index.js';

/** Settings of the llama-cli driver, from `--driver-opt k=v` (DriverConfig.options). */
export interface LlamaCliOptions {
  /** Program (default: llama-completion, the classic interactive llama-cli; found by findLlamaBinary). */
  bin?: string;
  /** Reverse prompt that ends a turn when the model writes it (spec 5.2); never shown in the output. */
  sentinel: string;
  ctx: number;
  threads?: number;
  /** Tokens per turn when a chat gives no maxTokens. */
  nPredict: number;
  /** `pipe` (stdin/stdout pipes) or `pty` (a pseudo-terminal through node-pty). */
  transport: 'pipe' | 'pty';
  startTimeoutMs: number;
  stopGraceMs: number;
  args: string[];
}

const KNOWN = new Set(['bin', 'sentinel', 'ctx', 'threads', 'n_predict', 'transport', 'start_timeout_ms', 'stop_grace_ms', 'args']);

function num(o: Record<string, string>, key: string, def: number | undefined, min: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new SwarmError('SWARM_ERR_CONFIG', `llama-cli option ${key} must be an integer >= ${min}, got "${v}"`);
  return n;
}

/** Validate the string options of DriverConfig into typed settings. */
export function parseLlamaCliOptions(o: Record<string, string>): LlamaCliOptions {
  for (const k of Object.keys(o)) if (!KNOWN.has(k)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown llama-cli option "${k}" (known: ${[...KNOWN].join(', ')})`);
  const transport = o.transport ?? 'pipe';
  if (transport !== 'pipe' && transport !== 'pty') throw new SwarmError('SWARM_ERR_CONFIG', `llama-cli option transport must be pipe or pty, got "${transport}"`);
  const threads = num(o, 'threads', undefined, 1);
  return {
    ...(o.bin ? { bin: o.bin } : {}),
    sentinel: o.sentinel || '###END###',
    ctx: num(o, 'ctx', 4096, 0)!,
    ...(threads !== undefined ? { threads } : {}),
    nPredict: num(o, 'n_predict', 512, 1)!,
    transport,
    startTimeoutMs: num(o, 'start_timeout_ms', 120_000, 100)!,
    stopGraceMs: num(o, 'stop_grace_ms', 3000, 0)!,
    args: (o.args ?? '').split(/\s+/).filter(Boolean),
  };
}
