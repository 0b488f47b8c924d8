import path from 'node:path';
import { SwarmError } from '../../protocol/index.js';
import { findLlamaBinary } from '../llama-build/index.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';
import { binWithout, cpuVariants, rememberedSkip, rememberSkip, resolved } from '../llama-build/cpu-variant.js';
import { EngineProcess, freePort, keepLoopAlive, type EngineExit } from './engine-process.js';
import { parseLlamaServerOptions, type LlamaServerOptions } from './options.js';
import { SseDecoder, type CompletionChunk } from './sse.js';

const HOST = '127.0.0.1';

function describeExit(e: EngineExit | undefined): string {
  if (!e) return 'running';
  return e.signal ? `killed by ${e.signal}` : `exit code ${e.code}`;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Drives llama.cpp's `llama-server`: spawns it on a free loopback port (or, with option `url`, uses an
 * engine that is already running and shared by several workers), and streams POST /completion.
 */
export class LlamaServerDriver implements Driver {
  readonly name = 'llama-server';
  readonly options: LlamaServerOptions;
  private proc: EngineProcess | undefined;
  /**
   * Requests in flight on each engine process: its exit aborts them, one handler per process. A
   * handler per request on the process's exit promise stayed attached until the engine exited:
   * about 225 bytes a request, for as long as the engine lives.
   */
  private readonly flights = new WeakMap<EngineProcess, Set<AbortController>>();
  private base: string | undefined;
  private starting: Promise<void> | undefined;
  private lastExit: EngineExit | undefined;
  /** The ggml CPU variant in use when the top ones had to be hidden (SIGILL); undefined when ggml's own pick runs. */
  cpuVariant: string | undefined;
  /** The variants hidden above it. */
  private cpuHidden: string[] = [];

  constructor(private readonly config: DriverConfig) {
    this.options = parseLlamaServerOptions(config.options);
  }

  /** Base URL of the engine (after start). */
  get url(): string | undefined { return this.base; }

  fallback(): string | undefined {
    return this.cpuVariant ? `llama-server on CPU variant ${this.cpuVariant}, ${this.cpuHidden.join(', ')} hidden (killed by SIGILL on this CPU)` : undefined;
  }

  pids(): number[] {
    return this.proc?.alive && this.proc.pid !== undefined ? [this.proc.pid] : [];
  }

  async start(): Promise<void> {
    if (this.options.url) {
      if (!this.base) { await keepLoopAlive(this.waitHealthy(this.options.url, undefined)); this.base = this.options.url; }
      return;
    }
    if (this.proc?.alive && this.base) return;
    this.starting ??= keepLoopAlive(this.spawnEngine()).finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    await this.starting?.catch(() => {});
    const p = this.proc;
    this.proc = undefined;
    this.base = this.options.url ? this.base : undefined;
    if (p) await p.stop(this.options.stopGraceMs);
  }

  private args(port: number): string[] {
    const o = this.options;
    const a = ['-m', this.config.model!, '--host', HOST, '--port', String(port), '-np', String(o.slots), '-c', String(o.ctx), '--no-webui'];
    if (o.threads !== undefined) a.push('-t', String(o.threads));
    return [...a, ...o.args];
  }

  private async spawnEngine(): Promise<void> {
    const bin = this.options.bin ?? findLlamaBinary('llama-server');
    if (!bin) throw new SwarmError('SWARM_ERR_ENGINE_NOT_FOUND', 'llama-server not found in SWARM_LLAMA_BIN_DIR, the build cache or PATH: run `swarm engine build`');
    if (!this.config.model) throw new SwarmError('SWARM_ERR_CONFIG', 'the llama-server driver needs a model (--model PATH.gguf)');
    if (this.proc) await this.proc.stop(0);
    // A CPU that claims features it faults on kills the engine with SIGILL: hide ggml's top CPU
    // variants one at a time until one starts, and remember how many for the next start.
    const variants = cpuVariants(path.dirname(resolved(bin)));
    const first = variants.length > 0 ? Math.min(rememberedSkip(bin), variants.length - 1) : 0;
    for (let skip = first; ; skip++) {
      try {
        await this.spawnOn(binWithout(bin, variants, skip));
      } catch (err) {
        const sigill = this.lastExit?.signal === 'SIGILL';
        if (!sigill || variants.length === 0) throw err;
        if (skip + 1 >= variants.length) {
          throw new SwarmError('SWARM_ERR_ENGINE_START', `llama-server killed by SIGILL with every CPU variant of its build (tried ${variants.slice(first).join(', ')}); this CPU runs none of them`, { cause: err });
        }
        continue;
      }
      if (skip > 0) {
        this.cpuVariant = variants[skip];
        this.cpuHidden = variants.slice(0, skip);
        if (skip !== first) rememberSkip(bin, skip, variants[skip]);
        process.stderr.write(`warning: llama-server: CPU variant(s) ${variants.slice(0, skip).join(', ')} excluded (killed by SIGILL on this CPU); using ${variants[skip]}\n`);
      }
      return;
    }
  }

  private async spawnOn(bin: string): Promise<void> {
    this.lastExit = undefined;
    // A port found free can be taken before the server binds it; try a fresh one a few times.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort(HOST);
      const proc = new EngineProcess(bin, this.args(port));
      this.proc = proc;
      const base = `http://${HOST}:${port}`;
      try {
        await this.waitHealthy(base, proc);
        this.base = base;
        return;
      } catch (err) {
        await proc.stop(0);
        this.lastExit = proc.exitInfo;
        if (this.proc === proc) this.proc = undefined;
        const bindFailed = /bind|address already in use/i.test(proc.outputTail(10));
        if (!bindFailed || attempt >= 3) throw err;
      }
    }
  }

  /** Poll GET /health until it says ok; fail early when the engine exits, and after startTimeoutMs. */
  private async waitHealthy(base: string, proc: EngineProcess | undefined): Promise<void> {
    const deadline = Date.now() + this.options.startTimeoutMs;
    let last = 'no answer';
    for (;;) {
      if (proc && !proc.alive) {
        throw new SwarmError('SWARM_ERR_ENGINE_START', `llama-server ${describeExit(proc.exitInfo)} before it was ready:\n${proc.outputTail()}`);
      }
      try {
        const res = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) });
        const body = await res.text();
        if (res.ok) return;
        last = `HTTP ${res.status} ${body.slice(0, 200)}`;
      } catch (err) { last = err instanceof Error ? err.message : String(err); }
      if (Date.now() > deadline) {
        const tail = proc ? `\n${proc.outputTail()}` : '';
        throw new SwarmError('SWARM_ERR_ENGINE_START', `llama-server at ${base} not ready after ${this.options.startTimeoutMs} ms (${last})${tail}`);
      }
      await (proc ? Promise.race([sleep(100), proc.exited]) : sleep(250));
    }
  }

  private body(prompt: string, opts: ChatOptions): Record<string, unknown> {
    const b: Record<string, unknown> = { prompt, stream: true, cache_prompt: true, n_predict: opts.maxTokens ?? -1 };
    // One slot per worker: the slot's KV cache holds this worker's last prompt, which the hub's
    // cache-aware dispatch matches new tasks against.
    if (this.options.slot !== undefined) b.id_slot = this.options.slot;
    if (opts.stop && opts.stop.length > 0) b.stop = opts.stop;
    if (opts.temperature !== undefined) b.temperature = opts.temperature;
    if (opts.seed !== undefined) b.seed = opts.seed;
    if (opts.grammar !== undefined) b.grammar = opts.grammar;
    if (opts.jsonSchema !== undefined) b.json_schema = opts.jsonSchema;
    return b;
  }

  /** Why a stream broke: the engine died (ENGINE_DIED, and it restarts on the next chat). */
  private async died(proc: EngineProcess | undefined, cause: unknown): Promise<SwarmError> {
    const why = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause);
    if (!proc) return new SwarmError('SWARM_ERR_ENGINE_DIED', `shared llama-server at ${this.options.url} went away during generation (${why})`, { cause });
    await Promise.race([proc.exited, sleep(1000)]);
    if (proc.alive) {
      // The engine is up but our stream broke: restart it rather than trust its state.
      await proc.stop(this.options.stopGraceMs);
      return new SwarmError('SWARM_ERR_ENGINE_DIED', `lost the stream from llama-server (${why}); it was restarted`, { cause });
    }
    return new SwarmError('SWARM_ERR_ENGINE_DIED', `llama-server ${describeExit(proc.exitInfo)} during generation:\n${proc.outputTail(10)}`, { cause });
  }

  /** The set of `proc`'s requests in flight, made with the one handler that aborts them at its exit. */
  private inFlight(proc: EngineProcess): Set<AbortController> {
    let set = this.flights.get(proc);
    if (!set) {
      const made = new Set<AbortController>();
      this.flights.set(proc, made);
      void proc.exited.then(() => { for (const a of made) a.abort(); });
      set = made;
    }
    return set;
  }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    await this.start();
    const proc = this.proc;
    const base = this.base!;
    if (opts.signal?.aborted) return {};
    const ac = new AbortController();
    const onAbort = (): void => ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    // A dead engine should end the stream now, not when the socket times out.
    const flights = proc ? this.inFlight(proc) : undefined;
    flights?.add(ac);
    if (proc && !proc.alive) ac.abort();
    let stats: ChatStats = {};
    let finished = false;
    try {
      const request = (): Promise<Response> => fetch(`${base}/completion`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(this.body(prompt, opts)), signal: ac.signal,
      });
      // llama-server sometimes closes a kept-alive connection under concurrent clients before it
      // answers ("other side closed"); nothing was generated yet, so one retry is safe.
      const res = await request().catch(async (err: unknown) => {
        if (ac.signal.aborted || (proc && !proc.alive)) throw err;
        return request();
      });
      if (!res.ok || !res.body) {
        const text = await res.text();
        let msg = text.slice(0, 500);
        let type: string | undefined;
        try { const e = (JSON.parse(text) as { error?: { message?: string; type?: string } }).error; msg = e?.message ?? msg; type = e?.type; } catch { /* not JSON */ }
        throw new SwarmError(serverErrorCode(type), `llama-server rejected the request (HTTP ${res.status}): ${msg}`);
      }
      const dec = new SseDecoder();
      const handle = (c: CompletionChunk): string | undefined => {
        if (c.stop) {
          finished = true;
          const tokensIn = c.tokens_evaluated ?? c.timings?.prompt_n;
          const tokensOut = c.tokens_predicted ?? c.timings?.predicted_n;
          stats = { ...(tokensIn !== undefined ? { tokensIn } : {}), ...(tokensOut !== undefined ? { tokensOut } : {}) };
        }
        return c.content ? c.content : undefined;
      };
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        for (const ev of dec.push(chunk)) {
          if (ev.kind === 'error') throw new SwarmError(serverErrorCode(ev.data.type), `llama-server: ${ev.data.message ?? JSON.stringify(ev.data)}`);
          const text = handle(ev.data);
          if (text) yield text;
        }
        if (finished) break;
      }
      for (const ev of dec.end()) if (ev.kind === 'data') { const text = handle(ev.data); if (text) yield text; }
      if (!finished && !opts.signal?.aborted) throw new Error('stream ended before the final chunk');
      return stats;
    } catch (err) {
      if (opts.signal?.aborted) return stats;
      if (err instanceof SwarmError) throw err;
      throw await this.died(proc, err);
    } finally {
      flights?.delete(ac);
      opts.signal?.removeEventListener('abort', onAbort);
      // Closing the connection tells llama-server to free the slot (also when the caller stops iterating).
      ac.abort();
    }
  }
}

/** Factory for the `llama-server` driver (`--driver llama-server`, options: url, slots, ctx, threads, bin, args, …). */
export function llamaServerFactory(config: DriverConfig): Driver {
  return new LlamaServerDriver(config);
}

/** A prompt past the slot's context is the prompt's fault (not retried), as in the embedded engines. */
function serverErrorCode(type: string | undefined): 'SWARM_ERR_CONTEXT_EXCEEDED' | 'SWARM_ERR_TASK_FAILED' {
  return type === 'exceed_context_size_error' ? 'SWARM_ERR_CONTEXT_EXCEEDED' : 'SWARM_ERR_TASK_FAILED';
}
