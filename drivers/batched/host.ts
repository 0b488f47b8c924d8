/**
 * The batched engine host: one process per (host, model) that holds the model once and a context of
 * N sequences whose evaluations llama.cpp batches together. Workers connect over a Unix socket
 * (mode 0600); each connection owns one sequence until it closes, and a connection that finds none
 * free waits in a bounded line. The process is started detached by the first worker that finds no
 * engine (driver.ts), outlives any one worker, and exits once no worker has been connected for
 * `idleMs`. Logs go to stderr (a file next to the socket).
 */
import fs from 'node:fs';
import net from 'node:net';
import { LlamaLogLevel, type LlamaContextSequence, type LlamaModel } from 'node-llama-cpp';
import { bindingNote, loadFallback, loadLlama } from '../embedded/load-llama.js';
import { withKvUnified } from './kv-unified.js';
import { LlamaCompletion, generate, tailShape } from './generate.js';
import type { TailShape } from './prefix.js';
import { attentionShape } from './flash-attn.js';
import { kvLayoutChoice } from './kv-layout.js';
import { writeEngineInfo } from './engine-info.js';
import { GrammarCache } from '../embedded/grammar.js';
import { errorCodeOf } from '../../protocol/errors.js';
import { installBatchGate, type BatchGate } from './batch-gate.js';
import { ThreadTuner, cpuLimit, idleCores, installThreadTuner, mayOverlap, spareCore, startThreads, threadCap } from './threads.js';
import { LOAD_FAILED_EXIT, MAX_LINE, type EngineConfig, type FromEngine, type ToEngine } from './messages.js';
import { crashPoint } from './crash-hook.js';
import { StepLoop } from './step-loop.js';
import { HandoffStats } from './handoff-stats.js';
import { EndingWatch } from './ending.js';

const log = (msg: string): void => { process.stderr.write(`${new Date().toISOString()} ${msg}\n`); };

/** One worker connection: its sequence once it has one, and its chat in flight. */
interface Client {
  sock: net.Socket;
  seq?: number;
  /** The chats of this connection, run one after another: the running one first. */
  chats: { id: number; ac: AbortController }[];
  /** Settles when the last queued chat has ended. */
  tail: Promise<void>;
  closed: boolean;
  /** When this connection's last chat ended (its last message written), for HandoffStats. */
  endedAt?: number;
}

class Engine {
  private readonly free: number[] = [];
  private readonly waiting: Client[] = [];
  private readonly clients = new Set<Client>();
  private readonly completions: LlamaCompletion[];
  /** A sequence's idle time between chats and each chat's wait for its first token (logged at exit). */
  readonly handoff = new HandoffStats();
  /** Where a short prompt tail is cheaper widened (generate.ts). */
  private readonly shape: TailShape | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** A worker has held a sequence: from now on the short idle exit applies. */
  private started = false;

  constructor(private readonly cfg: EngineConfig, private readonly model: LlamaModel, private readonly sequences: LlamaContextSequence[],
    private readonly grammars: GrammarCache, private readonly gate: BatchGate | undefined, flashAttn: boolean, private readonly loop: StepLoop | undefined) {
    this.completions = sequences.map((s) => new LlamaCompletion({ contextSequence: s }));
    // Widening exists for flash attention's per-row kernel: with it off a short tail is cheap as it is.
    this.shape = sequences[0] && cfg.tailWiden !== false ? tailShape(model, flashAttn) : undefined;
    for (let i = sequences.length - 1; i >= 0; i--) this.free.push(i);
    this.armIdle();
  }

  /** No worker connected: exit after idleMs unless one comes. */
  private armIdle(): void {
    clearTimeout(this.idleTimer);
    if (this.clients.size > 0) return;
    // A new engine waits longer for its first workers: the one that started it may be slow to connect on a busy machine.
    const ms = this.started ? this.cfg.idleMs : Math.max(this.cfg.idleMs, 10_000);
    this.idleTimer = setTimeout(() => { log('no worker connected: exiting'); shutdown(0); }, ms);
  }

  accept(sock: net.Socket): void {
    crashPoint('listen');
    const c: Client = { sock, closed: false, chats: [], tail: Promise.resolve() };
    this.clients.add(c);
    clearTimeout(this.idleTimer);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (text: string) => {
      buf += text;
      if (buf.length > MAX_LINE && !buf.includes('\n')) { log('line too long: closing connection'); sock.destroy(); return; }
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        let m: ToEngine;
        try { m = JSON.parse(line) as ToEngine; } catch { log(`bad line: ${line.slice(0, 200)}`); continue; }
        this.handle(c, m);
      }
    });
    sock.on('error', () => {});
    sock.on('close', () => this.closed(c));
    const seq = this.free.pop();
    if (seq !== undefined) this.assign(c, seq);
    else if (this.waiting.length >= this.cfg.maxWaiting) {
      this.send(c, { t: 'refused', message: `all ${this.sequences.length} sequences are taken and ${this.waiting.length} connections wait already` });
      sock.end();
    } else this.waiting.push(c);
  }

  private assign(c: Client, seq: number): void {
    c.seq = seq;
    this.started = true;
    this.send(c, { t: 'seq', seq, of: this.sequences.length, ctx: this.sequences[seq]!.context.contextSize, pid: process.pid });
    crashPoint('greet');
  }

  private send(c: Client, m: FromEngine): void {
    if (c.closed || c.sock.destroyed) return;
    c.sock.write(JSON.stringify(m) + '\n');
    // A worker that stops reading must not grow our memory without bound: it loses its connection.
    if (c.sock.writableLength > MAX_LINE) { log(`worker on sequence ${c.seq} does not read: closing`); c.sock.destroy(); }
  }

  private handle(c: Client, m: ToEngine): void {
    if (m.t === 'abort') { c.chats.find((x) => x.id === m.id)?.ac.abort(); return; }
    if (m.t !== 'chat') return;
    const seq = c.seq;
    if (seq === undefined) { this.send(c, { t: 'error', id: m.id, code: 'SWARM_ERR_INTERNAL', message: 'chat before a sequence was assigned' }); return; }
    if (c.chats.length >= 4) { this.send(c, { t: 'error', id: m.id, code: 'SWARM_ERR_INTERNAL', message: 'too many chats queued on one connection' }); return; }
    const chat = { id: m.id, ac: new AbortController() };
    const behind = c.chats.length > 0;
    c.chats.push(chat);
    c.tail = c.tail.then(async () => {
      // Counted from its turn, not its arrival: a chat sent ahead (queued behind the running one)
      // starts as that one ends, and its sequence's idle time is the gap between the two.
      const start = performance.now();
      // A chat given up on before its turn is answered unrun (a task leased ahead that went back).
      if (chat.ac.signal.aborted) this.send(c, { t: 'done', id: m.id, tokensIn: 0, tokensOut: 0, tokensCached: 0, reason: 'abort' });
      else {
        this.handoff.arrived(c.endedAt !== undefined ? start - c.endedAt : undefined, behind);
        await this.run(c, seq, m, chat.ac.signal, start);
        c.endedAt = performance.now();
      }
      c.chats.splice(c.chats.indexOf(chat), 1);
    }).catch((err: unknown) => {
      // A tail that rejected would run none of this connection's later chats and never free its
      // sequence (closed() waits for it): its worker would wait for an answer for ever.
      const i = c.chats.indexOf(chat);
      if (i >= 0) c.chats.splice(i, 1);
      log(`chat ${m.id} on sequence ${seq} failed outside generation: ${err instanceof Error ? err.message : String(err)}`);
      this.send(c, { t: 'error', id: m.id, code: 'SWARM_ERR_INTERNAL', message: 'the batched engine failed this chat' });
    });
  }

  private async run(c: Client, seq: number, m: Extract<ToEngine, { t: 'chat' }>, signal: AbortSignal, arrived: number): Promise<void> {
    const { id, prompt, opts } = m;
    const stream = m.stream !== false;
    let grammar;
    try {
      grammar = await this.grammars.get(opts);
    } catch (err) {
      const what = opts.grammar !== undefined ? 'GBNF grammar' : 'JSON schema';
      this.send(c, { t: 'error', id, code: 'SWARM_ERR_TASK_FAILED', message: `invalid ${what}: ${err instanceof Error ? err.message : String(err)}` });
      return;
    }
    // Text goes out in pieces, not a message per token: each message wakes the worker (and, passed
    // on, the hub), which cost 140-250 µs of CPU per token outside llama.cpp with small models.
    const t0 = performance.now();
    let ttftMs: number | undefined;
    let buf = '';
    let lines = 0;
    let timer: NodeJS.Timeout | undefined;
    const flush = (): void => { clearTimeout(timer); timer = undefined; lines = 0; if (buf) { this.send(c, { t: 'chunk', id, text: buf }); buf = ''; } };
    // The worker's next task can be on its way before this one's result is.
    // Only where an end can be foreseen (a max_tokens): else no per-token work at all.
    const ending = m.endsWithinMs !== undefined && m.endsWithinMs > 0 && opts.maxTokens !== undefined && opts.maxTokens > 0 ? new EndingWatch(opts.maxTokens, m.endsWithinMs, () => this.send(c, { t: 'ending', id })) : undefined;
    try {
      const r = await generate({
        model: this.model, sequence: this.sequences[seq]!, completion: this.completions[seq]!, prompt, opts, grammar, signal,
        // Without the prefix cache every chat starts from an empty sequence, so all of its prompt is evaluated.
        ...(this.cfg.prefixCache === false ? { fresh: true } : {}), ...(this.loop ? { loop: this.loop } : {}),
        ...(this.cfg.prefixCache === false ? {} : { donors: this.sequences, ...(this.shape ? { shape: this.shape } : {}) }),
        ...(ending ? { onTokens: (n: number) => ending.tokens(n) } : {}),
        onText: (text) => {
          const first = ttftMs === undefined;
          if (first) {
            const now = performance.now();
            ttftMs = Math.round((now - t0) * 100) / 100;
            this.handoff.firstToken(now - arrived);
            crashPoint('chat');
          }
          buf += text;
          // The first text goes out at once: a watcher waits for it (time to first token), not for the pace.
          if (stream && first) { flush(); return; }
          // Unwatched, the text still reaches the worker's loop guard once it has lines enough to judge.
          if (!stream && text.includes('\n') && (lines += text.split('\n').length - 1) >= QUIET_FLUSH_LINES) { flush(); return; }
          timer ??= setTimeout(flush, stream ? STREAM_FLUSH_MS : QUIET_FLUSH_MS);
        },
      });
      clearTimeout(timer);
      this.send(c, { t: 'done', id, ...r, ...(buf ? { text: buf } : {}), ...(ttftMs !== undefined ? { ttftMs } : {}) });
    } catch (err) {
      clearTimeout(timer);
      flush();
      this.send(c, { t: 'error', id, code: errorCodeOf(err), message: err instanceof Error ? err.message : String(err) });
    } finally {
      this.gate?.end(this.sequences[seq]!);
    }
  }

  /** A worker left (or died): its chat stops, and its sequence goes to the next in line once free. */
  private closed(c: Client): void {
    if (c.closed) return;
    c.closed = true;
    this.clients.delete(c);
    const w = this.waiting.indexOf(c);
    if (w >= 0) this.waiting.splice(w, 1);
    const seq = c.seq;
    for (const x of c.chats) x.ac.abort();
    void c.tail.then(() => {
      if (seq === undefined) return;
      const next = this.waiting.shift();
      if (next) this.assign(next, seq);
      else this.free.push(seq);
    });
    this.armIdle();
  }
}

/**
 * How often a chat's text goes out while someone streams it; while nobody does, every few seconds or
 * once it holds enough lines for the worker's loop guard (5 repeats by default) to judge.
 */
const STREAM_FLUSH_MS = 40;
const QUIET_FLUSH_MS = 5000;
const QUIET_FLUSH_LINES = 16;

let server: net.Server | undefined;
let socketPath: string | undefined;

/** Last lines for the log, once the engine is up. */
const exitNotes: (() => void)[] = [];

function shutdown(code: number): never {
  for (const note of exitNotes) note();
  try { server?.close(); } catch { /* closing anyway */ }
  if (socketPath) try { fs.rmSync(socketPath, { force: true }); } catch { /* gone */ }
  process.exit(code);
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[process.argv.length - 1]!) as EngineConfig;
  const t0 = performance.now();
  const { llama, path: loadPath } = await loadLlama({
    logLevel: LlamaLogLevel.warn, logger: (level, message) => log(`[${level}] ${message}`),
    addonOverride: process.env.SWARM_TEST_EMBEDDED_ADDON || undefined, selfBuilt: true,
  });
  crashPoint('load');
  let model: LlamaModel;
  try { model = await llama.loadModel({ modelPath: cfg.model }); } catch (err) {
    // Its own exit code: the workers fail their tasks at once rather than start this engine again.
    log(`model failed to load: ${cfg.model}: ${err instanceof Error ? err.message : String(err)}`);
    shutdown(LOAD_FAILED_EXIT);
  }
  // Flash attention from the model's head size, the CPU and the KV layout (flash-attn.ts): llama.cpp's
  // own "auto" turns it on for every CPU model, which on heads its kernel runs scalar costs each
  // generated token 3x or more.
  // The KV layout with it (kv-layout.ts): flash attention's verdict depends on the layout, and a unified
  // cache's cost under flash attention on the cells the sequences hold.
  const ctxSize = Math.min(cfg.ctx, model.trainContextSize);
  const layout = kvLayoutChoice({ setting: cfg.kvUnified ?? 'auto', canUnify: loadPath === 'self-built', flashAttn: cfg.flashAttn ?? 'auto',
    shape: attentionShape(model), systemInfo: llama.systemInfo, sequences: cfg.sequences, ctx: ctxSize });
  const wantUnified = layout.unified;
  const fa = layout.flashAttn;
  const limit = threadCap(cpuLimit());
  const threads = cfg.threads === 'auto' ? await startThreads(limit) : cfg.threads;
  const makeContext = () => model.createContext({
    contextSize: ctxSize, sequences: cfg.sequences, threads, flashAttention: fa.on,
  });
  // One KV cache for all sequences where the binding takes it (the self-built addon): llama.cpp then
  // batches any set of busy sequences in one pass, and a shared prefix is copied as cell metadata.
  const { value: context, unified } = wantUnified
    ? await withKvUnified(llama, makeContext) : { value: await makeContext(), unified: false };
  // SWARM_THREADS_PROBE_BUSY=1: probe more threads with no core idle too (a bench's question: where a
  // bare server's second thread helps beside one busy process per core, does the engine's now that
  // its pool persists?); by default such probes only spin against the other processes.
  const probeBusy = process.env.SWARM_THREADS_PROBE_BUSY === '1';
  const tuner = cfg.threads === 'auto' && limit > 1 ? new ThreadTuner({ max: limit, start: threads, ...(probeBusy ? {} : { freeCores: idleCores() }) }) : undefined;
  if (tuner && !installThreadTuner(context, cfg.sequences, tuner)) log(`node-llama-cpp internals moved: ${threads} thread(s), not tuned`);
  if (tuner) exitNotes.push(() => log(`threads at exit ${tuner.threads()}; tokens/s by threads ${JSON.stringify(tuner.rates())}; switches ${tuner.switches}, probes ${tuner.probes}`));
  let shown = threads;
  if (tuner) setInterval(() => { if (tuner.threads() !== shown) { shown = tuner.threads(); log(`threads now ${shown}; tokens/s by threads ${JSON.stringify(tuner.rates())}`); } }, 5000).unref();
  const sequences = Array.from({ length: cfg.sequences }, () => context.getSequence());
  // The engine's own decode loop (step-loop.ts) where asked for and node-llama-cpp's internals allow it.
  // SWARM_ENGINE_STEP=sync|fused|split|overlap picks the step where the addon offers several (step-loop.ts);
  // by default on the main thread, and overlapping while a core idles beside the decode's threads.
  const step = process.env.SWARM_ENGINE_STEP;
  const kind = step === 'sync' || step === 'fused' || step === 'split' || step === 'overlap' ? step : undefined;
  const loop = cfg.loop === 'direct' ? await StepLoop.create(context, model, sequences[0]!, kind ? { step: kind } : { overlap: spareCore(() => tuner?.threads() ?? threads) }) : undefined;
  if (loop) {
    // Where the loop's time went (step-loop.ts, LoopStats): the benches read it from the log.
    exitNotes.push(() => {
      const s = loop.stats;
      const ms = (x: number) => Math.round(x);
      log(`loop at exit: ${loop.step} step, ${s.steps} steps, ${s.tokens} tokens decoded, ${s.generated} sampled (${s.steps ? (s.generated / s.steps).toFixed(1) : 0} a step), ${s.overlapped} overlapped (${s.wasted} tokens past an end), ${s.handoffs} chats after another on its sequence (${s.gapSteps} steps between); running ${ms(s.runningMs)} ms: decodes ${ms(s.decodeMs)}, samples ${ms(s.sampleMs)}, the rest ${ms(s.runningMs - s.decodeMs - s.sampleMs)}`);
    });
  }
  if (cfg.loop === 'direct' && !loop) log('node-llama-cpp internals moved (or the model needs KV checkpoints): node-llama-cpp\'s decode loop');
  const gate = loop ? undefined : installBatchGate(context);
  if (!loop && !gate) log('node-llama-cpp internals moved: decodes are batched as node-llama-cpp queues them (slower)');
  const engine = new Engine(cfg, model, sequences, new GrammarCache(llama), gate, fa.on, loop);
  exitNotes.push(() => log(`hand-off at exit: ${engine.handoff.line()}`));
  // The socket appears only now, fully loaded: a worker that can connect can chat. Owner-only (0600).
  socketPath = cfg.socket;
  fs.rmSync(cfg.socket, { force: true });
  const old = process.umask(0o177);
  server = net.createServer((sock) => engine.accept(sock));
  await new Promise<void>((resolve, reject) => { server!.once('error', reject); server!.listen(cfg.socket, () => resolve()); });
  process.umask(old);
  if (cfg.info) {
    writeEngineInfo(cfg.info, { pid: process.pid, model: cfg.model, sequences: cfg.sequences, ctx: context.contextSize, kv: unified ? 'unified' : 'per sequence', kv_why: layout.why, binding: bindingNote(loadPath), ...(loadFallback() ? { fallback: loadFallback() } : {}),
      loop: loop ? 'direct' : 'library', ...(loop ? { step: loop.step } : {}), threads: tuner ? `auto, ${threads} at start` : threads, flash_attn: fa.on ? 'on' : 'off', flash_attn_why: fa.why });
  }
  log(`ready: ${cfg.sequences} sequences of ${context.contextSize} tokens, KV cache ${unified ? 'unified' : 'per sequence'} (${loadPath} binding), ${layout.why}, ${loop ? `own decode loop (${loop.step} step${loop.overlapsWhenIdle && mayOverlap(tuner ? 1 : threads) ? ', overlapping while a core idles' : ''})` : 'node-llama-cpp\'s decode loop'}, ${threads} thread(s)${tuner ? ` (auto, of ${limit})` : ''}, flash attention ${fa.on ? 'on' : 'off'} (${fa.why}), ${Math.round(performance.now() - t0)} ms; socket ${cfg.socket}`);
}

process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));
main().catch((err: unknown) => {
  log(`fatal: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  shutdown(1);
});
