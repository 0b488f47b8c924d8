/**
 * The engine host: a child process of the worker that runs llama.cpp through node-llama-cpp, so that
 * a native crash takes down only this process. It reads NDJSON requests on stdin and writes NDJSON
 * events on stdout (see messages.ts); logs go to stderr. It exits when stdin closes (its driver is
 * gone); the fd-3 watchdog of EngineProcess covers the case where it cannot notice.
 */
import { LlamaCompletion, LlamaLogLevel, type LlamaGrammar, type LlamaContextSequence, type LlamaModel, type Llama } from 'node-llama-cpp';
import type { FromHost, HostChatOptions, HostConfig, ToHost } from './messages.js';
import { loadFallback, loadLlama } from './load-llama.js';
import { loadedCpuVariant } from '../llama-build/addon-variant.js';
import { GrammarCache } from './grammar.js';
import { checkFits, completionOptions } from './completion.js';
import { errorCodeOf } from '../../protocol/errors.js';
import { attentionShape, flashAttnChoice } from '../batched/flash-attn.js';

const send = (m: FromHost): void => { process.stdout.write(JSON.stringify(m) + '\n'); };
const log = (msg: string): void => { process.stderr.write(msg.endsWith('\n') ? msg : msg + '\n'); };


class Host {
  private readonly free: LlamaCompletion[] = [];
  private readonly waiting: (() => void)[] = [];
  private readonly running = new Map<number, AbortController>();
  private readonly grammars: GrammarCache;
  /** Tokens one sequence holds (every sequence of the context has the same). */
  private readonly contextSize: number;

  constructor(llama: Llama, private readonly model: LlamaModel, sequences: LlamaContextSequence[]) {
    for (const s of sequences) this.free.push(new LlamaCompletion({ contextSequence: s }));
    this.contextSize = sequences[0]!.contextSize;
    this.grammars = new GrammarCache(llama);
  }

  private async acquire(): Promise<LlamaCompletion> {
    while (this.free.length === 0) await new Promise<void>((r) => this.waiting.push(r));
    return this.free.pop()!;
  }

  private release(c: LlamaCompletion): void {
    this.free.push(c);
    this.waiting.shift()?.();
  }

  handle(m: ToHost): void {
    if (m.t === 'abort') { this.running.get(m.id)?.abort(); return; }
    if (m.t === 'chat') void this.chat(m.id, m.prompt, m.opts);
  }

  private async chat(id: number, prompt: string, opts: HostChatOptions): Promise<void> {
    faultHook();
    const ac = new AbortController();
    this.running.set(id, ac);
    let grammar: LlamaGrammar | undefined;
    try {
      grammar = await this.grammars.get(opts);
    } catch (err) {
      this.running.delete(id);
      const what = opts.grammar !== undefined ? 'GBNF grammar' : 'JSON schema';
      send({ t: 'error', id, code: 'SWARM_ERR_TASK_FAILED', message: `invalid ${what}: ${err instanceof Error ? err.message : String(err)}` });
      return;
    }
    const completion = await this.acquire();
    let tokensOut = 0;
    try {
      // Tokenized as llama.cpp does (with the SPM space prefix); node-llama-cpp would trim it from a
      // string prompt, which splits the first word differently from llama-server and llama-cli.
      const input = this.model.tokenize(prompt);
      const tokensIn = input.length + (this.model.tokens.shouldPrependBosToken ? 1 : 0);
      checkFits(tokensIn, this.contextSize);
      if (ac.signal.aborted) { send({ t: 'done', id, tokensIn: 0, tokensOut: 0, reason: 'abort' }); return; }
      const r = await completion.generateCompletionWithMeta(input, completionOptions(opts, grammar, {
        signal: ac.signal, onText: (text) => send({ t: 'chunk', id, text }), onTokens: (n) => { tokensOut += n; },
      }));
      send({ t: 'done', id, tokensIn, tokensOut, reason: r.metadata.stopReason });
    } catch (err) {
      send({ t: 'error', id, code: errorCodeOf(err), message: err instanceof Error ? err.message : String(err) });
    } finally {
      this.running.delete(id);
      this.release(completion);
    }
  }
}

/**
 * Test hook: SWARM_TEST_FAULTY_VARIANT=<variant> has this engine die of SIGILL at its first chat when
 * ggml loaded that CPU variant, as a variant that faults at its first decode does (the load-time case
 * is tested with a real library that faults as ggml initialises it).
 */
function faultHook(): void {
  const v = process.env.SWARM_TEST_FAULTY_VARIANT;
  if (v && loadedCpuVariant() === v) process.kill(process.pid, 'SIGILL');
}

/** What main() is doing, for the fatal message. */
let stage: 'binding' | 'model' = 'binding';

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[process.argv.length - 1]!) as HostConfig;
  // Since the process started: node itself and the import of node-llama-cpp (about 550 module files).
  const t0 = performance.now();
  const { llama, path: loadPath } = await loadLlama({
    logLevel: LlamaLogLevel.warn, logger: (level, message) => log(`[${level}] ${message}`),
    addonOverride: process.env.SWARM_TEST_EMBEDDED_ADDON || undefined,
  });
  const t1 = performance.now();
  stage = 'model';
  const model = await llama.loadModel({ modelPath: cfg.model });
  const t2 = performance.now();
  // The batched engine's rule (node-llama-cpp's default turns it on for every CPU model, which on heads
  // ggml's kernel runs scalar costs each generated token 3x or more); this context is a KV stream per slot.
  const ctx = Math.min(cfg.ctx, model.trainContextSize);
  const fa = flashAttnChoice(cfg.flashAttn ?? 'auto', attentionShape(model), llama.systemInfo, { unified: false, sequences: cfg.slots, ctx });
  const context = await model.createContext({ contextSize: ctx, sequences: cfg.slots, threads: cfg.threads, flashAttention: fa.on });
  log(`flash attention ${fa.on ? 'on' : 'off'} (${fa.why})`);
  const sequences = Array.from({ length: cfg.slots }, () => context.getSequence());
  const t3 = performance.now();
  const host = new Host(llama, model, sequences);

  let buf = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (text: string) => {
    const lines = (buf + text).split('\n');
    buf = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.trim()) continue;
      let m: ToHost;
      try { m = JSON.parse(line) as ToHost; } catch { log(`bad request line: ${line.slice(0, 200)}`); continue; }
      host.handle(m);
    }
  });
  // The driver closed our stdin (it stopped, or died): nothing more can be asked of us.
  process.stdin.on('end', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
  send({ t: 'ready', ms: { boot: Math.round(t0), llama: Math.round(t1 - t0), model: Math.round(t2 - t1), context: Math.round(t3 - t2) }, ctx: context.contextSize, load: loadPath, flashAttn: fa, ...(loadFallback() ? { fallback: loadFallback() } : {}) });
}

main().catch((err: unknown) => {
  send({ t: 'fatal', stage, message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
