import path from 'node:path';
import { SwarmError } from '../../protocol/index.js';
import { findLlamaBinary } from '../llama-build/index.js';
import type { EngineExit } from '../llama-server/index.js';
import { binWithout, cpuVariants, rememberedSkip, rememberSkip, resolved } from '../llama-build/cpu-variant.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';
import { parseLlamaCliOptions, type LlamaCliOptions } from './options.js';
import { StopFilter } from '../stop-filter.js';
import { pipeTransport, ptyTransport, type CliTransport } from './transport.js';
import { TurnReader, encodePrompt } from './turn.js';

/** Sampling settings fixed when the CLI starts; a chat that needs others restarts it. */
interface Settings { nPredict: number; temperature?: number; seed?: number; grammar?: string; jsonSchema?: Record<string, unknown> }

/** The CLI quit from a late interject before this turn began; run the turn on a fresh CLI. */
class RetryTurn extends Error {}

/** The CLI died of SIGILL in a turn before any text: its CPU variant is hidden, run the turn on the next. */
class IllegalInstruction extends Error {}

const sigill = (e: EngineExit | 'ready' | 'timeout' | undefined): boolean => typeof e === 'object' && e.signal === 'SIGILL';

function describeExit(e: EngineExit | undefined): string {
  if (!e) return 'running';
  return e.signal ? `killed by ${e.signal}` : `exit code ${e.code}`;
}

/**
 * Drives llama.cpp's interactive completion CLI as one long-lived process (spec 5.2): writes each
 * prompt as an input line and reads the answer until the CLI asks for input again. The session keeps
 * its context across chats, like a terminal conversation. Stop strings are cut here and end the turn
 * with SIGINT (the CLI's "interject"); sampling settings are command-line flags, so a chat with other
 * settings (temperature, seed, grammar, JSON schema, maxTokens) restarts the CLI with them.
 */
export class LlamaCliDriver implements Driver {
  readonly name = 'llama-cli';
  readonly options: LlamaCliOptions;
  private cli: CliTransport | undefined;
  private key = '';
  private reader = new TurnReader();
  private listener: ((t: string) => void) | undefined;
  private readyWaiter: (() => void) | undefined;
  private lock: Promise<unknown> = Promise.resolve();
  private interjected = false;
  /** ggml CPU variants hidden from the CLI (a SIGILL on this CPU); see llama-build/cpu-variant.ts. */
  private skip: number | undefined;
  /** The ggml CPU variant in use when the top ones had to be hidden; undefined when ggml's own pick runs. */
  cpuVariant: string | undefined;
  /** The variants hidden above it. */
  private cpuHidden: string[] = [];

  constructor(private readonly config: DriverConfig) {
    this.options = parseLlamaCliOptions(config.options);
  }

  fallback(): string | undefined {
    return this.cpuVariant ? `llama-cli on CPU variant ${this.cpuVariant}, ${this.cpuHidden.join(', ')} hidden (killed by SIGILL on this CPU)` : undefined;
  }

  pids(): number[] {
    return this.cli?.alive && this.cli.pid !== undefined ? [this.cli.pid] : [];
  }

  async start(): Promise<void> {
    await this.ensure({ nPredict: this.options.nPredict });
  }

  async stop(): Promise<void> {
    const c = this.cli;
    this.cli = undefined;
    if (c) await c.stop(this.options.stopGraceMs);
  }

  private args(s: Settings): string[] {
    const o = this.options;
    const a = ['-m', this.config.model!, '-if', '-no-cnv', '-r', o.sentinel, '--color', 'on', '-c', String(o.ctx), '-n', String(s.nPredict)];
    if (o.threads !== undefined) a.push('-t', String(o.threads));
    if (s.temperature !== undefined) a.push('--temp', String(s.temperature));
    if (s.seed !== undefined) a.push('--seed', String(s.seed));
    if (s.grammar !== undefined) a.push('--grammar', s.grammar);
    if (s.jsonSchema !== undefined) a.push('--json-schema', JSON.stringify(s.jsonSchema));
    return [...a, ...o.args];
  }

  private onData = (t: string): void => {
    const step = this.reader.push(t);
    if (step.text) this.listener?.(step.text);
    if (step.ready) { const w = this.readyWaiter; this.readyWaiter = undefined; w?.(); }
  };

  /** Resolves when the CLI asks for input; rejects with the exit if it ends first. */
  private waitReady(cli: CliTransport, timeoutMs?: number): Promise<'ready' | EngineExit | 'timeout'> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (v: 'ready' | EngineExit | 'timeout'): void => { clearTimeout(timer); this.readyWaiter = undefined; resolve(v); };
      this.readyWaiter = () => done('ready');
      void cli.exited.then((e) => done(e));
      if (timeoutMs !== undefined) timer = setTimeout(() => done('timeout'), timeoutMs);
    });
  }

  private async ensure(s: Settings): Promise<CliTransport> {
    const key = JSON.stringify(s);
    if (this.cli?.alive && this.key === key) return this.cli;
    if (this.cli) await this.stop();
    const bin = this.options.bin ?? findLlamaBinary('llama-completion');
    if (!bin) throw new SwarmError('SWARM_ERR_ENGINE_NOT_FOUND', 'llama-completion (the interactive llama-cli) not found in SWARM_LLAMA_BIN_DIR, the build cache or PATH: run `swarm engine build`');
    if (!this.config.model) throw new SwarmError('SWARM_ERR_CONFIG', 'the llama-cli driver needs a model (--model PATH.gguf)');
    // A CPU that claims features it faults on kills the CLI with SIGILL as it loads the model (or at its
    // first decode, see attempt): hide ggml's top CPU variants one at a time, as llama-server does, and
    // remember how many beside the build (shared with llama-server: the same variants).
    const variants = cpuVariants(path.dirname(resolved(bin)));
    const first = variants.length > 0 ? Math.min(Math.max(this.skip ?? 0, rememberedSkip(bin)), variants.length - 1) : 0;
    for (let skip = first; ; skip++) {
      try {
        const cli = await this.spawn(binWithout(bin, variants, skip), s, key);
        this.useVariant(bin, variants, skip, first);
        return cli;
      } catch (err) {
        if (!(err instanceof IllegalInstruction) || variants.length === 0) throw err;
        if (skip + 1 >= variants.length) throw this.everyVariant(variants.slice(first), err);
      }
    }
  }

  private useVariant(bin: string, variants: string[], skip: number, first: number): void {
    this.skip = skip;
    if (skip === 0) return;
    this.cpuVariant = variants[skip];
    this.cpuHidden = variants.slice(0, skip);
    if (skip === first) return;
    rememberSkip(bin, skip, variants[skip]);
    process.stderr.write(`warning: llama-cli: CPU variant(s) ${variants.slice(0, skip).join(', ')} excluded (killed by SIGILL on this CPU); using ${variants[skip]}\n`);
  }

  private everyVariant(tried: string[], cause: Error): SwarmError {
    return new SwarmError('SWARM_ERR_ENGINE_START', `llama-cli killed by SIGILL with every CPU variant of its build (tried ${tried.join(', ')}); this CPU runs none of them`, { cause });
  }

  private async spawn(bin: string, s: Settings, key: string): Promise<CliTransport> {
    this.reader = new TurnReader();
    const cli = this.options.transport === 'pty'
      ? await ptyTransport(bin, this.args(s), this.onData).catch((err: unknown) => {
        throw new SwarmError('SWARM_ERR_ENGINE_START', err instanceof Error ? err.message : String(err), { cause: err });
      })
      : pipeTransport(bin, this.args(s), this.onData);
    this.cli = cli;
    this.key = key;
    const r = await this.waitReady(cli, this.options.startTimeoutMs);
    if (r === 'ready') return cli;
    await cli.stop(0);
    if (this.cli === cli) this.cli = undefined;
    if (sigill(r)) throw new IllegalInstruction(`${bin} killed by SIGILL before it was ready:\n${cli.outputTail()}`);
    const why = r === 'timeout' ? `not ready after ${this.options.startTimeoutMs} ms` : describeExit(r) + ' before it was ready';
    throw new SwarmError('SWARM_ERR_ENGINE_START', `${bin} ${why}:\n${cli.outputTail()}`);
  }

  chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    // One turn at a time: the CLI is a single conversation.
    const prev = this.lock;
    let release!: () => void;
    this.lock = new Promise<void>((r) => { release = r; });
    const self = this;
    return (async function* () {
      await prev.catch(() => {});
      try { return yield* self.turn(prompt, opts); } finally { release(); }
    })();
  }

  private async *turn(prompt: string, opts: ChatOptions): AsyncGenerator<string, ChatStats | void, void> {
    // Our SIGINT at the end of the last turn may have met the CLI already waiting for input, which
    // makes it quit (exit 130) a moment later. If this turn then dies before any text, run it again.
    let retryable = this.interjected;
    this.interjected = false;
    for (;;) {
      try {
        return yield* this.attempt(prompt, opts, retryable);
      } catch (err) {
        if (err instanceof RetryTurn) { retryable = false; continue; }
        if (!(err instanceof IllegalInstruction)) throw err;
        // Died of SIGILL at its first decode, before any text: the next start hides one variant more.
        // Bounded: each round hides one more, and ensure() fails once none is left.
        if (!this.hideNextVariant()) throw this.everyVariant(cpuVariants(path.dirname(resolved(this.binPath()))), err);
      }
    }
  }

  private binPath(): string { return this.options.bin ?? findLlamaBinary('llama-completion') ?? 'llama-completion'; }

  /** Hide one more CPU variant for the next start; false when none is left to fall back to. */
  private hideNextVariant(): boolean {
    const bin = this.binPath();
    const variants = cpuVariants(path.dirname(resolved(bin)));
    const next = Math.max(this.skip ?? 0, rememberedSkip(bin)) + 1;
    if (next >= variants.length) return false;
    this.skip = next;
    rememberSkip(bin, next, variants[next]);
    this.cpuVariant = variants[next];
    this.cpuHidden = variants.slice(0, next);
    process.stderr.write(`warning: llama-cli: CPU variant(s) ${variants.slice(0, next).join(', ')} excluded (killed by SIGILL at the first decode on this CPU); using ${variants[next]}\n`);
    return true;
  }

  private async *attempt(prompt: string, opts: ChatOptions, retryable: boolean): AsyncGenerator<string, ChatStats | void, void> {
    const settings: Settings = {
      nPredict: opts.maxTokens ?? this.options.nPredict,
      ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
      ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
      ...(opts.grammar !== undefined ? { grammar: opts.grammar } : {}),
      ...(opts.jsonSchema !== undefined ? { jsonSchema: opts.jsonSchema } : {}),
    };
    const cli = await this.ensure(settings);
    if (opts.signal?.aborted) return {};
    const filter = new StopFilter([...(opts.stop ?? []), this.options.sentinel]);
    const queue: string[] = [];
    let wake: (() => void) | undefined;
    this.listener = (t) => { queue.push(t); wake?.(); };
    let interrupted = false;
    const interrupt = (): void => { if (!interrupted) { interrupted = true; cli.signal('SIGINT'); } };
    const onAbort = (): void => { interrupt(); wake?.(); };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const ready = this.waitReady(cli);
    let end: 'ready' | EngineExit | 'timeout' | undefined;
    let yielded = false;
    void ready.then((r) => { end = r; wake?.(); });
    this.reader.beginTurn();
    const release = cli.hold();
    try {
      if (!cli.write(encodePrompt(prompt) + '\n')) throw new SwarmError('SWARM_ERR_ENGINE_DIED', `llama-cli is gone:\n${cli.outputTail(10)}`);
      for (;;) {
        while (queue.length > 0) {
          const out = filter.push(queue.shift()!);
          if (out && !opts.signal?.aborted) { yielded = true; yield out; }
          // The stop string is ours to find; interject so the CLI stops generating.
          // Not once the CLI is back at its prompt: there an interject makes it quit.
          if (filter.stopped && end === undefined) interrupt();
        }
        if (end !== undefined) break;
        await new Promise<void>((r) => { wake = r; });
        wake = undefined;
      }
      if (end === 'ready') {
        const rest = filter.end();
        if (rest && !opts.signal?.aborted) yield rest;
        this.interjected = interrupted;
        return {};
      }
      if (retryable && !yielded && (end as EngineExit).code === 130) throw new RetryTurn();
      if (!yielded && sigill(end)) throw new IllegalInstruction(`llama-cli killed by SIGILL during its first decode:\n${cli.outputTail(10)}`);
      // Text was given out: the task fails (and is retried), and the next start hides one variant more.
      if (sigill(end)) this.hideNextVariant();
      // It exited. After our SIGINT that can be a race with a turn ending by itself (a second
      // interject quits the CLI): the answer is complete, the next chat starts a new CLI.
      if (interrupted) return {};
      throw new SwarmError('SWARM_ERR_ENGINE_DIED', `llama-cli ${describeExit(end as EngineExit)} during generation:\n${cli.outputTail(10)}`);
    } finally {
      release();
      opts.signal?.removeEventListener('abort', onAbort);
      this.listener = undefined;
      // A consumer that stops early leaves the CLI generating: interject and wait for its prompt.
      if (end === undefined && cli.alive) {
        interrupt();
        const r = await Promise.race([ready, new Promise((res) => setTimeout(res, 5000, 'timeout'))]);
        if (r !== 'ready') await this.stop();
      }
    }
  }
}

/** Factory for the `llama-cli` driver (`--driver llama-cli`, options: bin, sentinel, ctx, threads, n_predict, transport, args). */
export function llamaCliFactory(config: DriverConfig): Driver {
  return new LlamaCliDriver(config);
}
