/**
 * What both node-llama-cpp engines (the per-worker host and the batched host) ask of a completion,
 * so that their answers agree: llama.cpp's default sampling, stop strings, seed, grammar, and no
 * endless context shifting. Also the chat options a driver sends to its host.
 */
import type { LlamaCompletionGenerationOptions, LlamaGrammar } from 'node-llama-cpp';
import { SwarmError } from '../../protocol/errors.js';
import type { ChatOptions } from '../types.js';
import type { HostChatOptions } from './messages.js';

/** llama.cpp's default sampling (as llama-server uses when a request sets nothing). */
const SAMPLING = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05 } as const;

/** node-llama-cpp completion options for one chat. */
export function completionOptions(opts: HostChatOptions, grammar: LlamaGrammar | undefined, o: {
  signal: AbortSignal; onText: (text: string) => void; onTokens: (n: number) => void;
}): LlamaCompletionGenerationOptions {
  const temperature = opts.temperature ?? SAMPLING.temperature;
  return {
    onTextChunk: (text) => { if (text) o.onText(text); },
    onToken: (tokens) => { o.onTokens(tokens.length); },
    signal: o.signal,
    stopOnAbortSignal: true,
    // Unbounded, a chat ends at the latest when the context is full (no endless context shifting).
    ...(opts.maxTokens !== undefined ? { maxTokens: opts.maxTokens } : { disableContextShift: true }),
    temperature,
    ...(temperature > 0 ? { topK: SAMPLING.topK, topP: SAMPLING.topP, minP: SAMPLING.minP } : {}),
    ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    repeatPenalty: false,
    ...(grammar ? { grammar } : {}),
    ...(opts.stop && opts.stop.length > 0 ? { customStopTriggers: opts.stop.filter(Boolean) } : {}),
  };
}

/**
 * A prompt must fit in the sequence's context with room for one token of answer. node-llama-cpp would
 * otherwise drop the prompt's start to make it fit, and the answer would rest on its end alone while
 * the receipt counted every token in; llama-server refuses such a request too.
 */
export function checkFits(tokensIn: number, contextSize: number): void {
  if (tokensIn < contextSize) return;
  throw new SwarmError('SWARM_ERR_CONTEXT_EXCEEDED',
    `the prompt is ${tokensIn} tokens and the engine's context ${contextSize} tokens per sequence (one more is needed for the answer): shorten the prompt or raise --driver-opt ctx=N`);
}

/** The part of a driver's ChatOptions that travels to its engine host. */
export function hostChatOptions(opts: ChatOptions): HostChatOptions {
  return {
    ...(opts.maxTokens !== undefined ? { maxTokens: opts.maxTokens } : {}),
    ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    ...(opts.stop?.length ? { stop: opts.stop } : {}),
    ...(opts.grammar !== undefined ? { grammar: opts.grammar } : {}),
    ...(opts.jsonSchema !== undefined ? { jsonSchema: opts.jsonSchema } : {}),
  };
}
