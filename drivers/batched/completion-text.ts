/**
 * The text of one chat as node-llama-cpp's LlamaCompletion makes it, token by token, for the engine's
 * own decode loop (step-loop.ts): the same detokenizing with the tokens before as context, bytes of a
 * character split over tokens held until it is whole, stop strings (the chat's and a grammar's) held
 * back while they may still match and cut where they do, whitespace a grammar trims held until
 * something follows it, and the same stop reasons. It runs the body of LlamaCompletion's generation
 * loop (3.x, `_generateResponse`) with node-llama-cpp's own stop detector and token stream regulator,
 * so that the text is the library loop's to the character. Those classes are not in the package's
 * exports: they are loaded from its files next to its entry point (`loadTextInternals`), and an engine
 * that does not find them keeps the library loop.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { LlamaGrammar, LlamaModel, Token } from 'node-llama-cpp';

const UNKNOWN_UNICODE_CHAR = '\ufffd';

/** Why a generation ended, in LlamaCompletion's words (the engine's receipts carry them). */
export type StopReason = 'eogToken' | 'stopGenerationTrigger' | 'customStopTrigger' | 'maxTokens' | 'abort';

interface Lock { dispose(): void }
interface QueuedRelease { createTextIndexLock(i: number): Lock; createTokenIndexLock(i: number): Lock }
interface Regulator {
  addChunk(c: { tokens: Token[]; text: string }): QueuedRelease;
  popFreeChunkTokens(): Token[];
  getPartiallyFreeChunk(tokenizer: unknown): { tokens: Token[]; text: string };
}
interface Detector {
  addStopTrigger(trigger: unknown): Detector;
  recordGeneration(g: { text: string; tokens: Token[]; queuedTokenRelease: QueuedRelease }): void;
  readonly hasTriggeredStops: boolean;
  readonly hasTriggers: boolean;
  getTriggeredStops(): unknown[];
}
interface TextInternals {
  StopGenerationDetector: (new () => Detector) & { resolveStopTriggers(triggers: readonly unknown[], tokenizer: unknown): unknown[] };
  TokenStreamRegulator: new () => Regulator;
  getQueuedTokensBeforeStopTrigger(stops: unknown[], partial: { tokens: Token[]; text: string }, tokenizer: unknown): Token[];
}

let internals: Promise<TextInternals | undefined> | undefined;

/** node-llama-cpp's stop detector and stream regulator, from its dist folder; undefined where they moved. */
export function loadTextInternals(): Promise<TextInternals | undefined> {
  internals ??= (async () => {
    try {
      const entry = pathToFileURL(createRequire(import.meta.url).resolve('node-llama-cpp'));
      const at = (p: string): Promise<Record<string, unknown>> => import(new URL(p, entry).href) as Promise<Record<string, unknown>>;
      const [sgd, tsr, q] = await Promise.all([at('./utils/StopGenerationDetector.js'), at('./utils/TokenStreamRegulator.js'), at('./utils/getQueuedTokensBeforeStopTrigger.js')]);
      const r = { StopGenerationDetector: sgd.StopGenerationDetector, TokenStreamRegulator: tsr.TokenStreamRegulator, getQueuedTokensBeforeStopTrigger: q.getQueuedTokensBeforeStopTrigger };
      if (typeof r.StopGenerationDetector !== 'function' || typeof r.TokenStreamRegulator !== 'function' || typeof r.getQueuedTokensBeforeStopTrigger !== 'function') return undefined;
      if (typeof (r.StopGenerationDetector as { resolveStopTriggers?: unknown }).resolveStopTriggers !== 'function') return undefined;
      return r as unknown as TextInternals;
    } catch { return undefined; }
  })();
  return internals;
}

/** Tokens that end a completion beside the model's end-of-generation tokens (LlamaCompletion: Gemma's file separators). */
export function extraEosTokens(model: LlamaModel): Set<Token> {
  const out = new Set<Token>();
  const arch = model.fileInfo.metadata?.general?.architecture as string | undefined;
  if (arch !== 'gemma' && arch !== 'gemma2') return out;
  for (const token of model.iterateAllTokens()) {
    const text = model.detokenize([token], true);
    if (text === '<|file_separator|>' || text === '<|fim_prefix|>') { out.add(token); if (out.size === 2) break; }
  }
  return out;
}

export interface TextOptions {
  stops: readonly string[];
  grammar: LlamaGrammar | undefined;
  /** Ends the chat after this many generated tokens (LlamaCompletion counts every sampled token). */
  maxTokens: number;
  /** Released text, in order. */
  onText: (text: string) => void;
  /** Released tokens (the receipt's tokens out). */
  onTokens: (n: number) => void;
}

/** One chat's text: `push` each sampled token; it says why the chat ends there, or undefined to go on. */
export class CompletionText {
  private readonly res: Token[] = [];
  private readonly pending: Token[] = [];
  private readonly partial: Token[] = [];
  private readonly locks: Lock[] = [];
  /** Tokens of chunks held back (plain chats: pushPlain). */
  private readonly held: Token[] = [];
  /** No stop string and no grammar: pushPlain. */
  private readonly plain: boolean;
  private readonly regulator: Regulator;
  private readonly stops: Detector;
  private readonly custom: Detector;
  private readonly trim: boolean;
  private generated = 0;

  constructor(private readonly model: LlamaModel, private readonly x: TextInternals, private readonly eos: ReadonlySet<Token>, private readonly o: TextOptions, forceFull = false) {
    this.regulator = new x.TokenStreamRegulator();
    this.stops = new x.StopGenerationDetector();
    this.custom = new x.StopGenerationDetector();
    const tokenizer = model.tokenizer;
    if (o.grammar) for (const s of x.StopGenerationDetector.resolveStopTriggers(o.grammar.stopGenerationTriggers, tokenizer)) this.stops.addStopTrigger(s);
    const custom = o.stops.filter(Boolean);
    if (custom.length > 0) for (const s of x.StopGenerationDetector.resolveStopTriggers(custom, tokenizer)) this.custom.addStopTrigger(s);
    this.trim = o.grammar?.trimWhitespaceSuffix ?? false;
    this.plain = !o.grammar && custom.length === 0 && !forceFull;
  }

  /**
   * Whether pushing `token` next may end the chat by the token alone: an end-of-generation token, or
   * the last its limit allows. A stop string it may complete is not foreseen.
   */
  mayEnd(token: Token): boolean {
    return (this.o.maxTokens > 0 && this.generated + 1 >= this.o.maxTokens) || this.eos.has(token) || this.model.isEogToken(token);
  }

  /** LlamaCompletion's handling of one token (its `for await` body), with `aborted` read where it reads the signal. */
  push(token: Token, aborted: boolean): StopReason | undefined {
    return this.plain ? this.pushPlain(token, aborted) : this.pushFull(token, aborted);
  }

  /**
   * The same without stop strings and grammar (most chats), without the regulator's and detectors'
   * objects: with no stop detector the regulator's only locks are a whole chunk held while its text
   * ends in a split character (or is empty after one), all released by the next chunk that does not,
   * and an end-of-generation token, which is never released. `held` stands for those chunks.
   */
  private pushPlain(token: Token, aborted: boolean): StopReason | undefined {
    const { model } = this;
    this.generated++;
    const tokens = this.partial.length === 0 ? [token] : [...this.partial, token];
    const text = model.detokenize([token]);
    if (this.partial.length === 0 && text.endsWith(UNKNOWN_UNICODE_CHAR) && !model.isSpecialToken(token) && !model.isEogToken(token)) {
      this.partial.push(token);
      return undefined;
    }
    this.partial.length = 0;
    const eog = model.isEogToken(token) || this.eos.has(token);
    if (text.endsWith(UNKNOWN_UNICODE_CHAR) || (text === '' && this.held.length > 0 && !model.isSpecialToken(token))) {
      this.held.push(...tokens);
    } else {
      for (const t of this.held) this.pending.push(t);
      this.held.length = 0;
      if (!eog) for (const t of tokens) this.pending.push(t);
    }
    // Held chunks before an end-of-generation token that is itself held are never released.
    this.release();
    if (eog) return 'eogToken';
    if (aborted) return 'abort';
    if (this.o.maxTokens > 0 && this.generated >= this.o.maxTokens) return 'maxTokens';
    return undefined;
  }

  private pushFull(token: Token, aborted: boolean): StopReason | undefined {
    const { model } = this;
    this.generated++;
    const tokens = this.partial.length === 0 ? [token] : [...this.partial, token];
    const text = model.detokenize([token]);
    const eog = model.isEogToken(token) || this.eos.has(token);
    if (this.partial.length === 0 && text.endsWith(UNKNOWN_UNICODE_CHAR) && !model.isSpecialToken(token) && !model.isEogToken(token)) {
      // The first bytes of a character: decided with the next token (and, as the library does, not counted against the limit yet).
      this.partial.push(token);
      return undefined;
    }
    this.partial.length = 0;
    const q = this.regulator.addChunk({ tokens, text });
    if (text.endsWith(UNKNOWN_UNICODE_CHAR) || (this.trim && text.trim() === '') || (text === '' && this.locks.length > 0 && !model.isSpecialToken(token))) {
      this.locks.push(q.createTextIndexLock(0));
    } else {
      while (this.locks.length > 0) this.locks.shift()!.dispose();
    }
    if (this.stops.hasTriggers) this.stops.recordGeneration({ text, tokens, queuedTokenRelease: q });
    if (this.custom.hasTriggers) this.custom.recordGeneration({ text, tokens, queuedTokenRelease: q });
    if (eog) q.createTokenIndexLock(0);
    for (const t of this.regulator.popFreeChunkTokens()) this.pending.push(t);
    if (this.stops.hasTriggeredStops || this.custom.hasTriggeredStops || eog) {
      const triggered = this.stops.hasTriggeredStops ? this.stops.getTriggeredStops() : this.custom.getTriggeredStops();
      const partly = this.regulator.getPartiallyFreeChunk(model.tokenizer);
      for (const t of this.x.getQueuedTokensBeforeStopTrigger(triggered, partly, model.tokenizer)) this.pending.push(t);
      this.release();
      return eog ? 'eogToken' : this.stops.hasTriggeredStops ? 'stopGenerationTrigger' : 'customStopTrigger';
    }
    this.release();
    if (aborted) return 'abort';
    if (this.o.maxTokens > 0 && this.generated >= this.o.maxTokens) return 'maxTokens';
    return undefined;
  }

  private release(): void {
    if (this.pending.length === 0) return;
    this.o.onTokens(this.pending.length);
    this.o.onText(this.model.detokenize(this.pending, false, this.res));
    for (const t of this.pending) this.res.push(t);
    this.pending.length = 0;
  }
}
