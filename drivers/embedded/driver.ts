import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SwarmError, isErrorCode } from '../../protocol/index.js';
import { StopFilter } from '../stop-filter.js';
import { EngineLoadError } from '../engine-error.js';
import { EngineProcess, type EngineExit } from '../llama-server/index.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';
import { engineLadder, noteAddonSigill, type AddonLadder } from '../llama-build/addon-variant.js';
import type { FromHost, HostConfig, ToHost } from './messages.js';
import { hostChatOptions } from './completion.js';
import { resolveModel } from './model-uri.js';
import { parseEmbeddedOptions, type EmbeddedOptions } from './options.js';

/** The host script next to this file, with our own extension (.ts under tap's loader, .js in dist). */
const HERE = fileURLToPath(import.meta.url);
const HOST_SCRIPT = path.join(path.dirname(HERE), 'host' + path.extname(HERE));

/** Our node flags (loaders such as tap's TypeScript one), minus a debugger's, whose port the engine would fight over. */
const hostExecArgv = (): string[] => process.execArgv.filter((a) => !/^--(inspect|debug)/.test(a));

/**
 * Starts in a row that may die of SIGILL before the engine is ready: each hides one more CPU variant
 * (ggml's x86-64 build has 14, its baseline last), so this bounds a ladder that did not move.
 */
const MAX_SIGILL_STARTS = 16;

function describeExit(e: EngineExit | undefined): string {
  if (!e) return 'running';
  return e.signal ? `was killed by ${e.signal}` : `exited with code ${e.code}`;
}

/** Events of one chat, queued until the generator takes them. */
interface ChatChannel { push(m: FromHost | { t: 'exit' }): void }

/**
 * How the engine loaded (for logs and benchmarks), in ms: `boot` node and the import of node-llama-cpp
 * in the host, `llama` its llama.cpp binding, then the model and its context; `total` as the driver saw it.
 */
export interface EmbeddedLoadTimes { boot: number; llama: number; model: number; context: number; total: number }

/**
 * llama.cpp through node-llama-cpp, in a child process (host.ts) so that a native crash cannot take the
 * worker's network loop down. The child runs in its own process group with the fd-3 orphan watchdog of
 * EngineProcess; requests and events are NDJSON over its stdin/stdout. A dead engine fails the running
 * chats with SWARM_ERR_ENGINE_DIED and is started again by the next chat.
 */
export class EmbeddedDriver implements Driver {
  readonly name = 'embedded';
  readonly options: EmbeddedOptions;
  /** Load times of the current engine, once started. */
  loadTimes: EmbeddedLoadTimes | undefined;
  /** How the current engine loaded llama.cpp: `prebuilt-direct` skipped node-llama-cpp's binary test process. */
  loadPath: 'prebuilt-direct' | 'getLlama' | 'self-built' | undefined;
  /** What the engine resolved for flash attention, and why (from its `ready`). */
  flashAttn: { on: boolean; why: string } | undefined;
  /** What the engine loads instead of its first choice after a SIGILL on this CPU, and why (from its `ready`). */
  private loadedFallback: string | undefined;
  private proc: EngineProcess | undefined;
  private starting: Promise<void> | undefined;
  private modelPath: string | undefined;
  private partial = '';
  private nextId = 1;
  private readonly chats = new Map<number, ChatChannel>();
  private readyWaiter: ((m: FromHost) => void) | undefined;
  private stopping = false;
  /** Engines that died of SIGILL and moved the addon choice on (what the next start runs instead). */
  private readonly sigillNotes = new WeakMap<EngineProcess, string>();
  private readonly holds = new WeakMap<EngineProcess, { n: number; release: (() => void) | undefined }>();

  constructor(private readonly config: DriverConfig) {
    this.options = parseEmbeddedOptions(config.options);
  }

  fallback(): string | undefined { return this.loadedFallback; }

  pids(): number[] {
    return this.proc?.alive && this.proc.pid !== undefined ? [this.proc.pid] : [];
  }

  async start(): Promise<void> {
    // An engine that is loading is not ready yet: wait for it rather than trust `alive`.
    if (this.starting) return this.starting;
    if (this.proc?.alive) return;
    this.stopping = false;
    this.starting = this.spawnEngine().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  /**
   * Keep the event loop alive while something waits on the engine. EngineProcess.hold() is a plain
   * ref/unref of its stdout, so concurrent waiters (start, several chats) are counted here.
   */
  private hold(proc: EngineProcess): () => void {
    let h = this.holds.get(proc);
    if (!h) { h = { n: 0, release: undefined }; this.holds.set(proc, h); }
    if (h.n++ === 0) h.release = proc.hold();
    let done = false;
    const held = h;
    return () => {
      if (done) return;
      done = true;
      if (--held.n === 0) { held.release?.(); held.release = undefined; }
    };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.starting?.catch(() => {});
    const p = this.proc;
    this.proc = undefined;
    if (p) await p.stop(this.options.stopGraceMs);
  }

  private onStdout = (text: string): void => {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line) continue;
      let m: FromHost;
      try { m = JSON.parse(line) as FromHost; } catch { continue; }
      if (m.t === 'ready' || m.t === 'fatal') this.readyWaiter?.(m);
      else this.chats.get(m.id)?.push(m);
    }
  };

  private async spawnEngine(): Promise<void> {
    if (!this.config.model) throw new SwarmError('SWARM_ERR_CONFIG', 'the embedded driver needs a model (--model PATH.gguf or an hf: URI)');
    this.modelPath ??= await resolveModel(this.config.model, { stallMs: this.options.downloadStallMs });
    // A CPU variant that faults (SIGILL) while the engine loads: the next start hides it, one variant at
    // a time down the addon's ladder (addon-variant.ts), so the start succeeds on the first that runs.
    for (let n = 0; ; n++) {
      const died = await this.spawnOnce(this.modelPath);
      if (died === undefined) return;
      if (n < MAX_SIGILL_STARTS && !this.stopping) { process.stderr.write(`embedded engine: ${died}; starting again\n`); continue; }
      throw new SwarmError('SWARM_ERR_ENGINE_START', `embedded engine killed by SIGILL before it was ready ${n + 1} times: ${died}`);
    }
  }

  /** The engine's addon ladder: where its SIGILL record is (the engine computes the same from the same environment). */
  private ladder(): AddonLadder | undefined {
    return engineLadder({ selfBuilt: false, override: process.env.SWARM_TEST_EMBEDDED_ADDON || undefined });
  }

  /**
   * One engine start: resolves once it is ready, or with the SIGILL note when it died of SIGILL before
   * it was ready and the remembered choice moved (the next start runs something else); throws otherwise.
   */
  private async spawnOnce(modelPath: string): Promise<string | undefined> {
    if (this.proc) await this.proc.stop(0);
    const cfg: HostConfig = { model: modelPath, threads: this.options.threads, ctx: this.options.ctx, slots: this.options.slots, flashAttn: this.options.flashAttn };
    this.partial = '';
    const t0 = performance.now();
    const ladder = this.ladder();
    const proc = new EngineProcess(process.execPath, [...hostExecArgv(), HOST_SCRIPT, JSON.stringify(cfg)], { stdin: true, onStdout: this.onStdout });
    this.proc = proc;
    const release = this.hold(proc);
    let timer: NodeJS.Timeout | undefined;
    try {
      const first = await new Promise<FromHost | EngineExit | 'timeout'>((resolve) => {
        this.readyWaiter = resolve;
        void proc.exited.then(resolve);
        timer = setTimeout(() => resolve('timeout'), this.options.startTimeoutMs);
      });
      if (typeof first === 'object' && 't' in first && first.t === 'ready') {
        this.loadTimes = { ...first.ms, total: Math.round(performance.now() - t0) };
        this.loadPath = first.load;
        this.flashAttn = first.flashAttn;
        this.loadedFallback = first.fallback;
        void proc.exited.then((e) => this.onExit(proc, e, ladder));
        return undefined;
      }
      await proc.stop(0);
      if (this.proc === proc) this.proc = undefined;
      if (typeof first === 'object' && !('t' in first) && first.signal === 'SIGILL' && proc.pid !== undefined) {
        const note = noteAddonSigill(proc.pid, ladder);
        if (note) return note;
      }
      const reason = first === 'timeout' ? `was not ready after ${this.options.startTimeoutMs} ms`
        : 't' in first && first.t === 'fatal'
          ? (first.stage === 'binding' ? `could not load node-llama-cpp's llama.cpp binding: ${first.message}` : `could not load ${modelPath}: ${first.message}`)
          : `${describeExit(first as EngineExit)} before it was ready`;
      const message = `embedded engine ${reason}\n${proc.outputTail(10)}`.trim();
      // A model or binding that did not load will not load on the next try either.
      if (typeof first === 'object' && 't' in first && first.t === 'fatal') throw new EngineLoadError(message);
      throw new SwarmError('SWARM_ERR_ENGINE_START', message);
    } finally {
      clearTimeout(timer);
      this.readyWaiter = undefined;
      release();
    }
  }

  /** The engine went away: every chat in flight ends with ENGINE_DIED (or SHUTDOWN if we stopped it). */
  private onExit(proc: EngineProcess, exit: EngineExit, ladder: AddonLadder | undefined): void {
    if (this.proc === proc) this.proc = undefined;
    // A CPU variant that faults at a decode rather than at load: the next engine runs without it.
    if (exit.signal === 'SIGILL' && proc.pid !== undefined) {
      const note = noteAddonSigill(proc.pid, ladder);
      if (note) { this.sigillNotes.set(proc, note); process.stderr.write(`embedded engine: ${note}\n`); }
    }
    for (const ch of this.chats.values()) ch.push({ t: 'exit' });
  }

  private send(proc: EngineProcess, m: ToHost): boolean {
    return proc.write(JSON.stringify(m) + '\n');
  }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    await this.start();
    const started = this.proc;
    if (!started) throw new SwarmError('SWARM_ERR_SHUTDOWN', 'the embedded driver was stopped');
    let proc: EngineProcess = started;
    if (opts.signal?.aborted) return {};
    const id = this.nextId++;
    const queue: (FromHost | { t: 'exit' })[] = [];
    let wake: (() => void) | undefined;
    this.chats.set(id, { push: (m) => { queue.push(m); wake?.(); } });
    const filter = new StopFilter(opts.stop ?? []);
    let ended = false; // the host reported done or error for this chat
    let aborted = false;
    let heard = false; // the engine sent text for this chat
    const abort = (): void => {
      if (aborted) return;
      aborted = true;
      if (!ended) this.send(proc, { t: 'abort', id });
      wake?.();
    };
    opts.signal?.addEventListener('abort', abort, { once: true });
    let release = this.hold(proc);
    const hostOpts = hostChatOptions(opts);
    try {
      if (!this.send(proc, { t: 'chat', id, prompt, opts: hostOpts }) && !proc.alive) queue.push({ t: 'exit' });
      for (let reruns = 0; ;) {
        if (queue.length === 0) { await new Promise<void>((r) => { wake = r; }); wake = undefined; continue; }
        const m = queue.shift()!;
        if (m.t === 'chunk') {
          heard = true;
          if (aborted || filter.stopped) continue;
          const text = filter.push(m.text);
          if (text) yield text;
          if (filter.stopped) abort(); // the rest is not wanted; the engine may not know this stop string
        } else if (m.t === 'done') {
          ended = true;
          if (!aborted) { const rest = filter.end(); if (rest) yield rest; }
          return { tokensIn: m.tokensIn, tokensOut: m.tokensOut };
        } else if (m.t === 'error') {
          ended = true;
          throw new SwarmError(isErrorCode(m.code) ? m.code : 'SWARM_ERR_TASK_FAILED', m.message);
        } else if (m.t === 'exit') {
          if (this.stopping) { ended = true; throw new SwarmError('SWARM_ERR_SHUTDOWN', 'the embedded engine was stopped during generation'); }
          // A CPU variant that faulted before this chat's first text (its first decode): the chat runs
          // again on the next engine, which hides that variant, as if it had not started.
          if (!heard && !aborted && reruns < MAX_SIGILL_STARTS && this.sigillNotes.has(proc)) {
            reruns++;
            release();
            await this.start();
            const next = this.proc;
            if (!next) { ended = true; throw new SwarmError('SWARM_ERR_SHUTDOWN', 'the embedded driver was stopped'); }
            proc = next;
            release = this.hold(proc);
            if (!this.send(proc, { t: 'chat', id, prompt, opts: hostOpts }) && !proc.alive) queue.push({ t: 'exit' });
            continue;
          }
          ended = true;
          throw new SwarmError('SWARM_ERR_ENGINE_DIED', `embedded engine ${describeExit(proc.exitInfo)} during generation${this.sigillNotes.get(proc) ? ` (${this.sigillNotes.get(proc)})` : ''}\n${proc.outputTail(10)}`.trim());
        }
      }
    } finally {
      opts.signal?.removeEventListener('abort', abort);
      // The caller stopped iterating early: the engine must not keep generating for nobody.
      if (!ended && proc.alive) this.send(proc, { t: 'abort', id });
      this.chats.delete(id);
      release();
    }
  }
}

/** Factory for the `embedded` driver (`--driver embedded`, options: threads, ctx, slots, start_timeout_ms, …). */
export function embeddedFactory(config: DriverConfig): Driver {
  return new EmbeddedDriver(config);
}
