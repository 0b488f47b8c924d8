import { SwarmError } from '../../protocol/index.js';
import { driverOptions } from '../options.js';
import { ollamaBaseUrl } from './host.js';

/** Settings of the Ollama driver, from `--driver-opt k=v` (DriverConfig.options) and the environment. */
export interface OllamaOptions {
  /** Base URL of the Ollama server: option `host`, else OLLAMA_HOST, else http://127.0.0.1:11434. */
  url: string;
  /** Ollama model name (`llama3.2`, `qwen2.5:0.5b`): option `model`, else DriverConfig.model. */
  model: string;
  /** Send prompts without the model's template (`raw: true`); off by default so chat models see their template. */
  raw: boolean;
  /** How long Ollama keeps the model loaded after a request (`keep_alive`, e.g. `5m`, `-1`). */
  keepAlive?: string;
  /** Context size (`options.num_ctx`). */
  numCtx?: number;
  /** CPU threads (`options.num_thread`). */
  numThread?: number;
  /** On start, check that /api/tags lists the model (fail early with a hint to `ollama pull`). */
  checkModel: boolean;
  /** Timeout of start's requests (/api/version, /api/tags). */
  startTimeoutMs: number;
}

const on = (v: string): boolean => v === '1' || v === 'true' || v === 'yes' || v === 'on';

/** Validate the string options into typed settings; `env` is consulted for OLLAMA_HOST. */
export function parseOllamaOptions(raw: Record<string, string>, model: string | undefined, env: NodeJS.ProcessEnv = process.env): OllamaOptions {
  const o = driverOptions<'ollama'>('ollama', raw);
  const name = o.model || model;
  if (!name) throw new SwarmError('SWARM_ERR_CONFIG', 'the ollama driver needs a model name (--model NAME or --driver-opt model=NAME)');
  const url = ollamaBaseUrl(o.host ?? env.OLLAMA_HOST);
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new SwarmError('SWARM_ERR_CONFIG', `ollama host must be http:// or https://, got "${o.host ?? env.OLLAMA_HOST}"`);
  return {
    url,
    model: name,
    raw: on(o.raw),
    ...(o.keep_alive ? { keepAlive: o.keep_alive } : {}),
    ...(o.num_ctx !== undefined ? { numCtx: o.num_ctx } : {}),
    ...(o.num_thread !== undefined ? { numThread: o.num_thread } : {}),
    checkModel: on(o.check_model),
    startTimeoutMs: o.start_timeout_ms,
  };
}
