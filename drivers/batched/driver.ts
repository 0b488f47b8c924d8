import { SwarmError, isErrorCode } from '../../protocol/index.js';
import { StopFilter } from '../stop-filter.js';
import { resolveModel } from '../embedded/model-uri.js';
import type { AheadTicket, ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';
import { SeqConn, type ChatEvent } from './conn.js';
import { connectSocket, enginePaths, enginePid, ensureEngine, type EnginePaths } from './engine-start.js';
import { hostChatOptions } from '../embedded/completion.js';
import { parseBatchedOptions, type BatchedOptions } from './options.js';
import type { ToEngine } from './messages.js';

/** Stats of a chat on the batched engine: the per-worker ones plus the prompt tokens the sequence held. */
export interface BatchedStats extends ChatStats { tokensCached: number }

/**
 * A worker's share of the host's batched engine (host.ts): one sequence per chat slot, held through a
 * Unix-socket connection between chats, so the sequence's evaluated tokens stay and a prompt that
 * starts with them evaluates only the rest. The first worker that finds no engine starts it
 * (engine-start.ts). An engine that dies ends the chats on it with SWARM_ERR_ENGINE_DIED; the next
 * chat starts a new one. Closing the connection (stop(), or this process dying) frees the sequence.
 */
export class BatchedDriver implements Driver {
  readonly name = 'batched';
  readonly tellsEnd = true;
  readonly options: BatchedOptions;
  private paths: EnginePaths | undefined;
  private modelPath: string | undefined;
  /** Connections that own a sequence and run no chat. */
  private readonly idle: SeqConn[] = [];
  private readonly busy = new Set<SeqConn>();
  /** Connections that hold a chat sent ahead behind their running one, and it (the ticket handed out). */
  private readonly reserved = new Map<SeqConn, Ahead>();
  private stopping = false;
  private nextId = 1;

  constructor(private readonly config: DriverConfig) {
    this.options = parseBatchedOptions(config.options);
  }

  /** The engine's pid: not a child of this worker (it is shared and outlives it), so not in pids(). */
  enginePid(): number | undefined { return this.paths ? enginePid(this.paths) : undefined; }

  pids(): number[] { return []; }

  /** Connect (starting the engine if none runs) and hold a sequence, so the first chat finds one. */
  async start(): Promise<void> {
    this.stopping = false;
    if (this.idle.some((c) => !c.closed) || this.busy.size > 0) return;
    this.idle.push(await this.connect());
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const c of [...this.idle, ...this.busy, ...this.reserved.keys()]) c.close();
    this.idle.length = 0;
    this.reserved.clear();
  }

  /**
   * A connection that owns a sequence. An engine that closes a connection before it gives a sequence
   * is going away (it idled out between our probe and our connect, or it died): try again, which
   * starts a new one. `signal`: the chat that wants it was given up (its task cancelled, its hub link
   * lost): stop waiting for an engine or a sequence.
   */
  private async connect(signal?: AbortSignal): Promise<SeqConn> {
    for (let attempt = 1; ; attempt++) {
      try { return await this.connectOnce(signal); } catch (err) {
        if (attempt >= 3 || this.stopping || signal?.aborted || !(err instanceof SwarmError) || err.code !== 'SWARM_ERR_ENGINE_DIED') throw err;
      }
    }
  }

  private async connectOnce(signal?: AbortSignal): Promise<SeqConn> {
    if (!this.config.model) throw new SwarmError('SWARM_ERR_CONFIG', 'the batched driver needs a model (--model PATH.gguf or an hf: URI)');
    this.modelPath ??= await resolveModel(this.config.model);
    const o = this.options;
    this.paths ??= enginePaths(o.dir, { model: this.modelPath, ctx: o.ctx, threads: o.threads, prefixCache: o.prefixCache, kvUnified: o.kvUnified, tailWiden: o.tailWiden, flashAttn: o.flashAttn, loop: o.loop });
    let sock;
    try { sock = await connectSocket(this.paths.socket); } catch {
      await ensureEngine(this.paths, { model: this.modelPath, threads: o.threads, ctx: o.ctx, sequences: o.sequences, idleMs: o.idleMs, maxWaiting: 4 * o.sequences, prefixCache: o.prefixCache, kvUnified: o.kvUnified, tailWiden: o.tailWiden, flashAttn: o.flashAttn, loop: o.loop }, o.startTimeoutMs, signal);
      sock = await connectSocket(this.paths.socket).catch((err: Error) => { throw new SwarmError('SWARM_ERR_ENGINE_START', `batched engine: ${err.message}`); });
    }
    const c = new SeqConn(sock);
    const release = c.hold();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      const waits: Promise<void>[] = [c.ready()];
      if (o.seqWaitMs > 0) {
        waits.push(new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            c.close();
            reject(new SwarmError('SWARM_ERR_ENGINE_START', `batched engine: all its sequences are taken (waited ${o.seqWaitMs} ms for one); start it with more (--driver-opt sequences=N; swarm up gives it one per agent slot) or stop a worker`));
          }, o.seqWaitMs);
        }));
      }
      if (signal) {
        waits.push(new Promise<never>((_, reject) => {
          onAbort = () => { c.close(); reject(abortError(signal)); };
          if (signal.aborted) onAbort();
          else signal.addEventListener('abort', onAbort, { once: true });
        }));
      }
      await (waits.length === 1 ? waits[0] : Promise.race(waits));
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      release();
    }
    return c;
  }

  private async take(signal?: AbortSignal): Promise<SeqConn> {
    for (let c = this.idle.pop(); c; c = this.idle.pop()) if (!c.closed) return c;
    return this.connect(signal);
  }

  /**
   * Send a chat behind the one running on a connection (a task leased ahead): the engine starts it as
   * that one ends, in the same turn of its loop, with no message to this process and back. Its events
   * wait in the ticket until chat() takes it over. One ahead per connection; undefined when no
   * connection is running a chat without one.
   */
  chatAhead(prompt: string, opts: ChatOptions): AheadTicket | undefined {
    if (this.stopping) return undefined;
    const c = [...this.busy].find((x) => !x.closed && !this.reserved.has(x));
    if (!c) return undefined;
    const id = this.nextId++;
    const t: Ahead = { ahead: id, c, queue: [] };
    c.listen(id, (e) => { t.queue.push(e); });
    if (!c.send(chatMessage(id, prompt, opts))) { c.listen(id, undefined); return undefined; }
    this.reserved.set(c, t);
    return t;
  }

  /** The ticket's chat, while it still holds its connection (not taken over or withdrawn). */
  private held(ticket: AheadTicket): Ahead | undefined {
    const t = ticket as Ahead;
    return t.c && this.reserved.get(t.c) === t ? t : undefined;
  }

  /** Take a chat sent ahead back: an engine that has not started it never does (it answers `done`, unrun, to no one). */
  withdrawAhead(ticket: AheadTicket): void {
    const t = this.held(ticket);
    if (!t) return;
    this.reserved.delete(t.c);
    t.c.listen(t.ahead, undefined);
    t.c.send({ t: 'abort', id: t.ahead });
    this.park(t.c);
  }

  /** A connection no chat runs on or waits for: back among the idle ones, or closed once stopping or gone. */
  private park(c: SeqConn): void {
    if (this.busy.has(c) || this.reserved.has(c)) return;
    if (!c.closed && !this.stopping) this.idle.push(c);
    else c.close();
  }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, BatchedStats | void, void> {
    if (opts.signal?.aborted) { if (opts.ahead) this.withdrawAhead(opts.ahead); return; }
    // Sent ahead and still ours: take it over (it may have started, and its text be waiting).
    const t = opts.ahead ? this.held(opts.ahead) : undefined;
    if (t) this.reserved.delete(t.c);
    const c = t ? t.c : await this.take(opts.signal);
    if (this.stopping) { c.close(); throw new SwarmError('SWARM_ERR_SHUTDOWN', 'the batched driver was stopped'); }
    // Given up while it waited for an engine: its abort listener below would never fire.
    if (opts.signal?.aborted) { this.idle.push(c); return; }
    this.busy.add(c);
    const id = t ? t.ahead : this.nextId++;
    const queue: ChatEvent[] = t ? t.queue : [];
    let wake: (() => void) | undefined;
    // Routed by id: events of an earlier chat given up on (its abort on its way) go to no one.
    c.listen(id, (e) => { queue.push(e); wake?.(); });
    const filter = new StopFilter(opts.stop ?? []);
    let ended = false;
    let aborted = false;
    const abort = (): void => {
      if (aborted) return;
      aborted = true;
      if (!ended) c.send({ t: 'abort', id });
      wake?.();
    };
    opts.signal?.addEventListener('abort', abort, { once: true });
    const release = c.hold();
    try {
      if (!t && !c.send(chatMessage(id, prompt, opts))) queue.push({ t: 'gone' });
      for (;;) {
        if (queue.length === 0) { await new Promise<void>((r) => { wake = r; }); wake = undefined; continue; }
        const m = queue.shift()!;
        if (m.t === 'ending') { if (!aborted) opts.onEnding?.(); continue; }
        if (m.t === 'chunk') {
          if (aborted || filter.stopped) continue;
          const text = filter.push(m.text);
          if (text) yield text;
          if (filter.stopped) abort(); // the rest is not wanted
        } else if (m.t === 'done') {
          ended = true;
          if (m.text && !aborted && !filter.stopped) { const text = filter.push(m.text); if (text) yield text; }
          if (!aborted) { const rest = filter.end(); if (rest) yield rest; }
          return { tokensIn: m.tokensIn, tokensOut: m.tokensOut, tokensCached: m.tokensCached, ...(m.ttftMs !== undefined ? { ttftMs: m.ttftMs } : {}) };
        } else if (m.t === 'error') {
          ended = true;
          throw new SwarmError(isErrorCode(m.code) ? m.code : 'SWARM_ERR_TASK_FAILED', m.message);
        } else {
          ended = true;
          if (c.closedByUs || this.stopping) throw new SwarmError('SWARM_ERR_SHUTDOWN', 'the batched driver was stopped during generation');
          throw new SwarmError('SWARM_ERR_ENGINE_DIED', 'the batched engine went away during generation');
        }
      }
    } finally {
      opts.signal?.removeEventListener('abort', abort);
      c.listen(id, undefined);
      this.busy.delete(c);
      release();
      // The caller stopped early: the engine must not keep generating for nobody. The engine runs a
      // connection's chats one after another, so the next chat waits for this abort to land.
      if (!ended && !c.closed) c.send({ t: 'abort', id });
      // A chat sent ahead on this connection keeps it until it is taken over or withdrawn.
      this.park(c);
    }
  }
}

/** The engine's chat message for a prompt and its options. */
function chatMessage(id: number, prompt: string, opts: ChatOptions): ToEngine {
  return {
    t: 'chat', id, prompt, opts: hostChatOptions(opts), ...(opts.stream === false ? { stream: false } : {}),
    ...(opts.endsWithinMs !== undefined && opts.endsWithinMs > 0 ? { endsWithinMs: opts.endsWithinMs } : {}),
  };
}

/** A chat sent ahead: its connection, and its events until chat() takes it over. */
interface Ahead extends AheadTicket { c: SeqConn; queue: ChatEvent[] }

/** The reason a chat was given up, as an error (an AbortSignal's reason need not be one). */
function abortError(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new SwarmError('SWARM_ERR_SHUTDOWN', 'the chat was given up while it waited for the batched engine');
}

/** Factory for the `batched` driver (`--driver batched`, options: threads, ctx, sequences, dir, idle_ms, start_timeout_ms, prefix_cache). */
export function batchedFactory(config: DriverConfig): Driver {
  return new BatchedDriver(config);
}
