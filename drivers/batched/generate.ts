import { LlamaCompletion, type LlamaContextSequence, type LlamaGrammar, type LlamaModel } from 'node-llama-cpp';
import type { HostChatOptions } from './messages.js';
import { checkFits, completionOptions } from '../embedded/completion.js';
import { cachedPrefix, evalStart, type TailShape } from './prefix.js';
import type { Sampling, StepLoop } from './step-loop.js';


/** What one generation reports. */
export interface Generated { tokensIn: number; tokensOut: number; tokensCached: number; reason: string }



/**
 * One completion on one sequence, with the same sampling as the per-worker engine. The sequence keeps
 * its tokens between calls, and only what follows the part of the prompt the sequence already holds is
 * evaluated (it is erased from the first differing token): that is the prefix cache, and
 * `tokensCached` says how much of it this prompt used. With `loop` the engine's own decode loop runs
 * it (step-loop.ts); without, node-llama-cpp's LlamaCompletion.
 */
export async function generate(o: {
  model: LlamaModel; sequence: LlamaContextSequence; completion: LlamaCompletion; prompt: string; opts: HostChatOptions;
  grammar: LlamaGrammar | undefined; signal: AbortSignal; onText: (text: string) => void;
  /** Tokens generated, as they come. */
  onTokens?: (n: number) => void;
  /** The engine's other sequences: a prompt starts from the one that holds its longest prefix. */
  donors?: readonly LlamaContextSequence[];
  /** The model's shape where a short tail is cheaper widened (flash attention on): see evalStart. */
  shape?: TailShape;
  /** Start from an empty sequence (no prefix cache). */
  fresh?: boolean;
  /** The engine's own decode loop; node-llama-cpp's completion without it. */
  loop?: StepLoop;
}): Promise<Generated> {
  const { model, opts } = o;
  // Tokenized as llama.cpp does (with the SPM space prefix), as the per-worker engine does.
  const input = o.model.tokenize(o.prompt);
  const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  const full = bos !== null ? [bos, ...input] : input;
  checkFits(full.length, o.sequence.contextSize);
  let tokensCached = 0;
  let tokensOut = 0;
  const onTokens = (n: number): void => { tokensOut += n; o.onTokens?.(n); };
  /** Where the prompt's evaluation starts: what the sequence holds of it, or copies from another. */
  const prepare = async (): Promise<number> => {
    if (o.fresh) await o.sequence.clearHistory();
    tokensCached = cachedPrefix(o.sequence.contextTokens, full);
    if (o.donors) tokensCached = await startFromLongestPrefix(o.sequence, o.donors, full, tokensCached, o.shape);
    const start = evalStart(tokensCached, full.length, o.shape);
    // Evaluation goes on from the first token the sequence does not hold: it must not hold these.
    if (start < o.sequence.nextTokenIndex) await o.sequence.eraseContextTokenRanges([{ start, end: o.sequence.nextTokenIndex }]);
    tokensCached = Math.min(tokensCached, start);
    return start;
  };
  const c = completionOptions(opts, o.grammar, { signal: o.signal, onText: o.onText, onTokens });
  if (o.loop) {
    const reason = await o.loop.run({
      sequence: o.sequence, prepare: async () => ({ tokens: full, start: await prepare() }),
      sampling: { temperature: c.temperature ?? 0, ...pick(c) }, grammar: o.grammar, stops: opts.stop ?? [],
      // As LlamaCompletion bounds a chat whose context may not shift: at most what the context holds.
      maxTokens: opts.maxTokens !== undefined && opts.maxTokens > 0 ? Math.min(opts.maxTokens, o.sequence.contextSize - full.length) : o.sequence.contextSize - full.length,
      signal: o.signal, onText: o.onText, onTokens,
    });
    return { tokensIn: full.length, tokensOut, tokensCached, reason };
  }
  await prepare();
  // The same sampling, stops and limits as the per-worker engine, so that both answer alike.
  const r = await o.completion.generateCompletionWithMeta(input, c);
  return { tokensIn: full.length, tokensOut, tokensCached, reason: r.metadata.stopReason };
}

const pick = (c: { topK?: number; topP?: number; minP?: number; seed?: number }): Omit<Sampling, 'temperature'> => ({
  ...(c.topK !== undefined ? { topK: c.topK } : {}), ...(c.topP !== undefined ? { topP: c.topP } : {}),
  ...(c.minP !== undefined ? { minP: c.minP } : {}), ...(c.seed !== undefined ? { seed: c.seed } : {}),
});

/** A donor must hold at least this many more tokens of the prompt than the sequence itself to be worth a copy. */
const MIN_SHARED = 32;

type CopyFrom = (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;

/**
 * Prefix sharing across sequences: when another sequence holds a longer start of this prompt (agents
 * sharing a system prompt or a debate's context), copy its KV cells (llama_memory_seq_cp, through
 * node-llama-cpp 3.x's internal `_copyStateFromOtherSequence`) up to that prefix, so only the rest is
 * evaluated. Returns how many tokens of the prompt the sequence now holds.
 */
async function startFromLongestPrefix(seq: LlamaContextSequence, donors: readonly LlamaContextSequence[], full: readonly number[], own: number, shape: TailShape | undefined): Promise<number> {
  const copy = (seq as unknown as { _copyStateFromOtherSequence?: CopyFrom })._copyStateFromOtherSequence;
  if (typeof copy !== 'function') return own;
  let best: LlamaContextSequence | undefined;
  let bestN = own + MIN_SHARED - 1;
  for (const d of donors) {
    if (d === seq) continue;
    const n = cachedPrefix(d.contextTokens, full);
    if (n > bestN) { best = d; bestN = n; }
  }
  if (!best) return own;
  // No more than is then evaluated from: cells copied only to be erased again cost a copy for nothing.
  const upTo = evalStart(bestN, full.length, shape);
  if (upTo < own + MIN_SHARED) return own;
  try {
    // Emptied first: in a unified KV cache llama_memory_seq_cp only adds the sequence's id to the donor's
    // cells and keeps the cells it held, which would then sit at the same positions as the copied ones.
    await seq.clearHistory();
    if (await copy.call(seq, best, upTo)) return upTo;
  } catch { /* the sequence evaluates the prompt from what it holds */ }
  return cachedPrefix(seq.contextTokens, full);
}

/**
 * The shape evalStart weighs a short tail with, when flash attention may be on (llama.cpp's "auto"
 * turns it on for the CPU); undefined when it is off or the file does not say.
 */
export function tailShape(model: LlamaModel, flashAttention: boolean | 'auto'): TailShape | undefined {
  if (flashAttention === false) return undefined;
  const a = model.fileInfo.architectureMetadata as {
    embedding_length?: number; block_count?: number; feed_forward_length?: number;
    attention?: { head_count?: number; head_count_kv?: number | number[]; key_length?: number };
  };
  const dim = a.embedding_length, layers = a.block_count, heads = a.attention?.head_count, ff = a.feed_forward_length;
  if (!dim || !layers || !heads || !ff) return undefined;
  const headDim = a.attention?.key_length ?? dim / heads;
  const kvHeads = typeof a.attention?.head_count_kv === 'number' ? a.attention.head_count_kv : heads;
  // q and o (dim x dim), k and v (dim x kv heads' dims), and the three feed-forward matrices.
  const perLayer = 2 * dim * dim + 2 * dim * kvHeads * headDim + 3 * dim * ff;
  return { headDim, headLayers: heads * layers, weightsPerToken: layers * perLayer };
}

export { LlamaCompletion };
