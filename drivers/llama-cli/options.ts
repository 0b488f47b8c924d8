import { driverOptions } from '../options.js';

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

/** Validate the string options of DriverConfig into typed settings. */
export function parseLlamaCliOptions(raw: Record<string, string>): LlamaCliOptions {
  const o = driverOptions<'llamaCli'>('llama-cli', raw);
  return {
    ...(o.bin ? { bin: o.bin } : {}),
    sentinel: o.sentinel,
    ctx: o.ctx,
    ...(o.threads !== undefined ? { threads: o.threads } : {}),
    nPredict: o.n_predict,
    transport: o.transport,
    startTimeoutMs: o.start_timeout_ms,
    stopGraceMs: o.stop_grace_ms,
    args: (o.args ?? '').split(/\s+/).filter(Boolean),
  };
}
