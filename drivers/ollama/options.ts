import { SwarmError } from '../../protocol/index.js';
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

const KNOWN = new Set(['host', 'model', 'raw', 'keep_alive', 'num_ctx', 'num_thread', 'check_model', 'start_timeout_ms']);

function int(o: Record<string, string>, key: string, min: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new SwarmError('SWARM_ERR_CONFIG', `ollama option ${key} must be an integer >= ${min}, got "${v}"`);
  return n;
}

function bool(o: Record<string, string>, key: string, def: boolean): boolean {
  const v = o[key];
  if (v === undefined || v === '') return def;
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  throw new SwarmError('SWARM_ERR_CONFIG', `ollama option ${key} must be true or false, got "${v}"`);
}

/** Validate the string options into typed settings; `env` is consulted for OLLAMA_HOST. */
export function parseOllamaOptions(o: Record<string, string>, model: string | undefined, env: NodeJS.ProcessEnv = process.env): OllamaOptions {
  for (const k of Object.keys(o)) if (!KNOWN.has(k)) throw new SwarmError('SWARM_ERR_CONFIG', `unknown ollama option "${k}" (known: ${[...KNOWN].join(', ')})`);
  const name = o.model || model;
  if (!name) throw new SwarmError('SWARM_ERR_CONFIG', 'the ollama driver needs a model name (--model NAME or --driver-opt model=NAME)');
  const url = ollamaBaseUrl(o.host ?? env.OLLAMA_HOST);
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new SwarmError('SWARM_ERR_CONFIG', `ollama host must be http:// or https://, got "${o.host ?? env.OLLAMA_HOST}"`);
  const numCtx = int(o, 'num_ctx', 1);
  const numThread = int(o, 'num_thread', 1);
  return {
    url,
    model: name,
    raw: bool(o, 'raw', false),
    ...(o.keep_alive ? { keepAlive: o.keep_alive } : {}),
    ...(numCtx !== undefined ? { numCtx } : {}),
    ...(numThread !== undefined ? { numThread } : {}),
    checkModel: bool(o, 'check_model', true),
    startTimeoutMs: int(o, 'start_timeout_ms', 100) ?? 10_000,
  };
}
