import { LlamaCompletion, type LlamaContextSequence, type LlamaGrammar, type LlamaModel } from 'node-llama-cpp';
import type { HostChatOptions } from './messages.js';

/** llama.cpp's default sampling (as llama-server uses when a request sets nothing), as in per-worker mode. */
const SAMPLING = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05 } as const;

/** What one generation reports. */
export interface Generated { tokensIn: number; tokensOut: number; tokensCached: number; reason: string }


/** How many leading tokens of `want` the sequence holds already (at least one token is always evaluated). */
export function cachedPrefix<T>(held: readonly T[], want: readonly T[]): number {
  const max = Math.min(held.length, want.length - 1);
  let i = 0;
  while (i < max && held[i] === want[i]) i++;
  return i;
}

/**
 * One completion on one sequence, with the same sampling as the per-worker engine. The sequence keeps
 * its tokens between calls, and node-llama-cpp's LlamaCompletion evaluates only what follows the part
 * of the prompt the sequence already holds (it erases from the first differing token): that is the
 * prefix cache, and `tokensCached` says how much of it this prompt used.
 */
export async function generate(o: {
  model: LlamaModel; sequence: LlamaContextSequence; completion: LlamaCompletion; prompt: string; opts: HostChatOptions;
  grammar: LlamaGrammar | undefined; signal: AbortSignal; onText: (text: string) => void;
}): Promise<Generated> {
  const { model, opts } = o;
  // Tokenized as llama.cpp does (with the SPM space prefix), as the per-worker engine does.
  const input = o.model.tokenize(o.prompt);
  const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  const full = bos !== null ? [bos, ...input] : input;
  const tokensCached = cachedPrefix(o.sequence.contextTokens, full);
  let tokensOut = 0;
  const temperature = opts.temperature ?? SAMPLING.temperature;
  const r = await o.completion.generateCompletionWithMeta(input, {
    onTextChunk: (text) => { if (text) o.onText(text); },
    onToken: (tokens) => { tokensOut += tokens.length; },
    signal: o.signal,
    stopOnAbortSignal: true,
    // Unbounded, a chat ends at the latest when the context is full (no endless context shifting).
    ...(opts.maxTokens !== undefined ? { maxTokens: opts.maxTokens } : { disableContextShift: true }),
    temperature,
    ...(temperature > 0 ? { topK: SAMPLING.topK, topP: SAMPLING.topP, minP: SAMPLING.minP } : {}),
    ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    repeatPenalty: false,
    ...(o.grammar ? { grammar: o.grammar } : {}),
    ...(opts.stop && opts.stop.length > 0 ? { customStopTriggers: opts.stop.filter(Boolean) } : {}),
  });
  return { tokensIn: full.length, tokensOut, tokensCached, reason: r.metadata.stopReason };
}

export { LlamaCompletion };
