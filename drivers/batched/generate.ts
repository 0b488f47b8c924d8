import { LlamaCompletion, type LlamaContextSequence, type LlamaGrammar, type LlamaModel } from 'node-llama-cpp';
import type { HostChatOptions } from './messages.js';
import { checkFits, completionOptions } from '../embedded/completion.js';
import { cachedPrefix } from './prefix.js';


/** What one generation reports. */
export interface Generated { tokensIn: number; tokensOut: number; tokensCached: number; reason: string }



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
  checkFits(full.length, o.sequence.contextSize);
  const tokensCached = cachedPrefix(o.sequence.contextTokens, full);
  let tokensOut = 0;
  // The same sampling, stops and limits as the per-worker engine, so that both answer alike.
  const r = await o.completion.generateCompletionWithMeta(input, completionOptions(opts, o.grammar, {
    signal: o.signal, onText: o.onText, onTokens: (n) => { tokensOut += n; },
  }));
  return { tokensIn: full.length, tokensOut, tokensCached, reason: r.metadata.stopReason };
}

export { LlamaCompletion };
