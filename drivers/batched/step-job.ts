/**
 * What the engine's decode loop (step-loop.ts) works with: the parts of node-llama-cpp's native
 * context, sequences and samplers it reaches into, a chat as the engine hands it over, the loop's
 * record of one chat (Job), and what a chat's step does to its sequence's token list.
 */
import { LlamaGrammarEvaluationState, type LlamaContextSequence, type LlamaGrammar, type LlamaModel, type Token } from 'node-llama-cpp';
import type { CompletionText, StopReason } from './completion-text.js';

export interface AddonContext {
  initBatch(n: number): void;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: AddonSampler): Promise<Token | -1>;
  /** The self-built addon's fused step (drivers/llama-build/addon-fused-step.ts); absent from node-llama-cpp's own. */
  decodeBatchAndSample?(logitIndexes: Uint32Array, samplers: AddonSampler[]): Promise<Tokens>;
  /** The same on the calling thread. */
  decodeBatchAndSampleSync?(logitIndexes: Uint32Array, samplers: AddonSampler[]): Tokens;
}
export type Tokens = Uint32Array & { errors?: string[] };
export interface AddonSampler { applyConfig(config: Record<string, unknown>): unknown; dispose(): void }
export interface SeqInternals {
  _sequenceId: number;
  _contextTokens: Token[];
  _nextTokenIndex: number;
  _resolveSamplerConfig(o: Record<string, unknown>): Record<string, unknown>;
  readonly needsCheckpoints: boolean;
}

/** Sampling as the engine asks node-llama-cpp's completion for it (embedded/completion.ts). */
export interface Sampling { temperature: number; topK?: number; topP?: number; minP?: number; seed?: number }

/** What a chat needs of the loop. `prepare` runs between steps and says where the prompt's evaluation starts. */
export interface StepChat {
  sequence: LlamaContextSequence;
  prepare: () => Promise<{ tokens: readonly Token[]; start: number }>;
  sampling: Sampling;
  grammar: LlamaGrammar | undefined;
  stops: readonly string[];
  /** Generated tokens at most (0: until the context is full). */
  maxTokens: number;
  signal: AbortSignal;
  onText: (text: string) => void;
  onTokens: (n: number) => void;
}

export interface Job {
  chat: StepChat;
  seq: SeqInternals;
  id: number;
  /** Tokens to decode next: the prompt's rest, or the last sampled token. */
  pending: Token[];
  sampler: AddonSampler;
  text: CompletionText;
  /** Tokens of `pending` in the current step, and the batch logit index of its sample (or -1). */
  take: number;
  logit: number;
  resolve: (reason: StopReason) => void;
  reject: (err: unknown) => void;
}

export const ONE_LOGIT = Uint32Array.of(0);
export const NO_LOGITS = new Uint32Array(0);
export const NONE: Token[] = [];
/** A promise whose rejection is handled later (or dropped): not an unhandled rejection meanwhile. */
export const quiet = <T>(p: Promise<T>): Promise<T> => { p.catch(() => {}); return p; };

/**
 * Where the loop's wall time went, in ms since the engine started: running (at least one chat in the
 * loop) split into decodes (a decode job queued until it returned; with the fused step, the decode
 * and its samples), samples (after the decode, until the last sample of the step came back; fused,
 * handling the sampled tokens) and the rest (preparing chats, building batches, the main
 * thread's turn); idle between is not counted. `steps` and `tokens` (generated tokens and prompt tokens
 * decoded) say how full the steps were.
 */
export interface LoopStats {
  runningMs: number; decodeMs: number; sampleMs: number; steps: number; tokens: number; generated: number;
  /** Steps whose decode ran while this thread handled the step before's text (`overlap`), and the tokens decoded past a chat's end that way. */
  overlapped: number; wasted: number;
  /** Chats that followed another on the same sequence while the loop ran, and the steps their sequence sat out between the two. */
  handoffs: number; gapSteps: number;
}

/**
 * How a step runs: `sync`, the decode and samples on node's main thread (decodeBatchAndSampleSync),
 * `fused`, in one pool job (decodeBatchAndSample), `split`, decodeBatch and a sampleToken per sequence;
 * `overlap`, fused, with the step before's text handled on the main thread while it decodes.
 */
export type StepKind = 'sync' | 'fused' | 'split' | 'overlap';

/** node-llama-cpp's sampler configuration for a chat's options, made by its sequence as the library's evaluation makes it. */
export function samplerConfig(seq: SeqInternals, chat: StepChat, model: LlamaModel): Record<string, unknown> {
  const s = chat.sampling;
  return seq._resolveSamplerConfig({
    temperature: s.temperature, minP: s.minP ?? 0, topK: s.topK ?? 40, topP: s.topP ?? 0.95,
    // Unseeded, the library seeds from the clock; once per chat here.
    seed: s.seed ?? Math.floor(Date.now() / 1000),
    ...(chat.grammar ? { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar: chat.grammar }) } : {}),
  });
}

/**
 * The step's tokens of `j` are in the KV cache now: its sequence's token list says so, as the library
 * keeps it (so the prefix cache, copies and erases work on it). Returns whether a sample of it is due.
 */
export function decoded(j: Job): boolean {
  const n = j.take;
  const done = n === j.pending.length ? j.pending : j.pending.splice(0, n);
  for (const t of done) j.seq._contextTokens.push(t);
  j.seq._nextTokenIndex += n;
  if (j.logit < 0) return false;
  j.pending = NONE;
  return true;
}
