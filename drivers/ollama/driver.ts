import { SwarmError } from '../../protocol/index.js';
import { StopFilter } from '../stop-filter.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';
import { NdjsonDecoder, type GenerateChunk } from './ndjson.js';
import { parseOllamaOptions, type OllamaOptions } from './options.js';

/** The text of a failed request: the `error` property of Ollama's JSON error body when there is one. */
function errorText(body: string): string {
  try {
    const e = (JSON.parse(body) as { error?: unknown }).error;
    if (typeof e === 'string') return e;
  } catch { /* not JSON */ }
  return body.slice(0, 500) || '(empty body)';
}

/** The low-level reason of a failed fetch (ECONNREFUSED and the like). */
function why(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const c = err.cause as { code?: string; message?: string } | undefined;
  return c?.code ?? c?.message ?? err.message;
}

/** Ollama's model names default to the tag `latest`. */
const fullName = (m: string): string => (m.includes(':') ? m : `${m}:latest`);

/**
 * Drives an Ollama server through its REST API: streams POST /api/generate (NDJSON), cancels by
 * aborting the request. Ollama runs as its own service, so this driver owns no process (`pids()` is
 * empty) and start() only checks that the server answers and has the model.
 */
export class OllamaDriver implements Driver {
  readonly name = 'ollama';
  readonly options: OllamaOptions;
  private ready = false;
  private starting: Promise<void> | undefined;

  constructor(config: DriverConfig, env: NodeJS.ProcessEnv = process.env) {
    this.options = parseOllamaOptions(config.options, config.model, env);
  }

  /** Base URL of the Ollama server. */
  get url(): string { return this.options.url; }

  pids(): number[] { return []; }

  async start(): Promise<void> {
    if (this.ready) return;
    this.starting ??= this.probe().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    await this.starting?.catch(() => {});
    this.ready = false;
  }

  private async get(path: string): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, { signal: AbortSignal.timeout(this.options.startTimeoutMs) });
    } catch (err) {
      throw new SwarmError('SWARM_ERR_ENGINE_START', `Ollama at ${this.url} is not reachable (${why(err)}); is \`ollama serve\` running? (OLLAMA_HOST sets the address)`, { cause: err });
    }
    const text = await res.text();
    if (!res.ok) throw new SwarmError('SWARM_ERR_ENGINE_START', `Ollama at ${this.url} answered ${path} with HTTP ${res.status}: ${errorText(text)}`);
    try { return JSON.parse(text) as unknown; } catch (err) {
      throw new SwarmError('SWARM_ERR_ENGINE_START', `Ollama at ${this.url} answered ${path} with something that is not JSON: ${text.slice(0, 200)}`, { cause: err });
    }
  }

  /** GET /api/version (is it Ollama, is it up), then GET /api/tags (is the model there). */
  private async probe(): Promise<void> {
    const v = await this.get('/api/version') as { version?: unknown };
    if (typeof v?.version !== 'string') throw new SwarmError('SWARM_ERR_ENGINE_START', `${this.url}/api/version did not answer like Ollama`);
    if (this.options.checkModel) {
      const tags = await this.get('/api/tags') as { models?: { name?: string; model?: string }[] };
      const want = fullName(this.options.model);
      const have = (tags.models ?? []).flatMap((m) => [m.name, m.model]).filter((n): n is string => typeof n === 'string');
      if (!have.some((n) => fullName(n) === want)) {
        throw new SwarmError('SWARM_ERR_ENGINE_START', `Ollama at ${this.url} has no model "${this.options.model}" (it has: ${have.join(', ') || 'none'}); run \`ollama pull ${this.options.model}\``);
      }
    }
    this.ready = true;
  }

  /** The /api/generate request body (docs/api.md: model, prompt, stream, format, options, raw, keep_alive). */
  body(prompt: string, opts: ChatOptions): Record<string, unknown> {
    const o = this.options;
    const options: Record<string, unknown> = {};
    if (opts.maxTokens !== undefined) options.num_predict = opts.maxTokens;
    if (opts.temperature !== undefined) options.temperature = opts.temperature;
    if (opts.seed !== undefined) options.seed = opts.seed;
    if (opts.stop && opts.stop.length > 0) options.stop = opts.stop;
    if (o.numCtx !== undefined) options.num_ctx = o.numCtx;
    if (o.numThread !== undefined) options.num_thread = o.numThread;
    const b: Record<string, unknown> = { model: o.model, prompt, stream: true };
    if (opts.jsonSchema !== undefined) b.format = opts.jsonSchema;
    if (Object.keys(options).length > 0) b.options = options;
    if (o.raw) b.raw = true;
    if (o.keepAlive !== undefined) b.keep_alive = /^-?\d+$/.test(o.keepAlive) ? Number(o.keepAlive) : o.keepAlive;
    return b;
  }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    if (opts.grammar !== undefined) {
      throw new SwarmError('SWARM_ERR_TASK_FAILED', 'the ollama driver cannot take a GBNF grammar (Ollama has no grammar parameter); use a JSON schema or another driver');
    }
    await this.start();
    if (opts.signal?.aborted) return {};
    const ac = new AbortController();
    const onAbort = (): void => ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const filter = new StopFilter(opts.stop ?? []);
    let stats: ChatStats = {};
    let finished = false;
    let streaming = false;
    try {
      let res: Response;
      try {
        res = await fetch(`${this.url}/api/generate`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(this.body(prompt, opts)), signal: ac.signal,
        });
      } catch (err) {
        if (opts.signal?.aborted) return stats;
        // The server may have gone since start(): probe again on the next chat.
        this.ready = false;
        throw new SwarmError('SWARM_ERR_ENGINE_START', `Ollama at ${this.url} is not reachable (${why(err)})`, { cause: err });
      }
      if (!res.ok || !res.body) {
        const text = await res.text();
        throw new SwarmError('SWARM_ERR_TASK_FAILED', `Ollama rejected the request (HTTP ${res.status}): ${errorText(text)}`);
      }
      streaming = true;
      const dec = new NdjsonDecoder();
      // Ollama applies the stop strings itself; the filter guarantees it and cuts a stop string split over chunks.
      const handle = (c: GenerateChunk): string => {
        if (c.error !== undefined) throw new SwarmError('SWARM_ERR_TASK_FAILED', `Ollama: ${c.error}`);
        if (c.done) {
          finished = true;
          stats = {
            ...(typeof c.prompt_eval_count === 'number' ? { tokensIn: c.prompt_eval_count } : {}),
            ...(typeof c.eval_count === 'number' ? { tokensOut: c.eval_count } : {}),
          };
        }
        return c.response ? filter.push(c.response) : '';
      };
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        for (const c of dec.push(chunk)) {
          const text = handle(c);
          if (text) yield text;
          if (filter.stopped) return stats;
        }
        if (finished) break;
      }
      for (const c of dec.end()) { const text = handle(c); if (text) yield text; }
      if (!finished && !opts.signal?.aborted) throw new Error('the stream ended before the final (done) line');
      const rest = filter.end();
      if (rest) yield rest;
      return stats;
    } catch (err) {
      if (opts.signal?.aborted) return stats;
      if (err instanceof SwarmError) throw err;
      if (err instanceof SyntaxError) throw new SwarmError('SWARM_ERR_TASK_FAILED', `Ollama sent a line that is not JSON: ${err.message}`, { cause: err });
      this.ready = false;
      throw new SwarmError(streaming ? 'SWARM_ERR_ENGINE_DIED' : 'SWARM_ERR_ENGINE_START', `lost the stream from Ollama at ${this.url} (${why(err)})`, { cause: err });
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      // Closing the connection is how Ollama learns to stop generating (also when the caller stops iterating).
      ac.abort();
    }
  }
}

/** Factory for the `ollama` driver (`--driver ollama --model NAME`, options: host, model, raw, keep_alive, num_ctx, num_thread, check_model). */
export function ollamaFactory(config: DriverConfig): Driver {
  return new OllamaDriver(config);
}
