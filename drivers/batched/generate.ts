import { LlamaCompletion, type Llama, type LlamaContextSequence, type LlamaGrammar, type LlamaModel } from 'node-llama-cpp';
import type { HostChatOptions } from './messages.js';

/** llama.cpp's default sampling (as llama-server uses when a request sets nothing), as in per-worker mode. */
const SAMPLING = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05 } as const;

/** What one generation reports. */
export interface Generated { tokensIn: number; tokensOut: number; tokensCached: number; reason: string }

/** Grammars compile once per text; a few distinct ones are kept (tasks tend to repeat them). */
export class GrammarCache {
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  constructor(private readonly llama: Llama) {}

  get(opts: HostChatOptions): Promise<LlamaGrammar> | undefined {
    const key = opts.grammar !== undefined ? 'g:' + opts.grammar : opts.jsonSchema !== undefined ? 'j:' + JSON.stringify(opts.jsonSchema) : undefined;
    if (key === undefined) return undefined;
    let g = this.grammars.get(key);
    if (!g) {
      g = opts.grammar !== undefined ? this.llama.createGrammar({ grammar: opts.grammar }) : this.jsonGrammar(opts.jsonSchema!);
      g.catch(() => this.grammars.delete(key));
      this.grammars.set(key, g);
      if (this.grammars.size > 16) this.grammars.delete(this.grammars.keys().next().value!);
    }
    return g;
  }

  /** node-llama-cpp's JSON-schema grammar, with integers that may not have an exponent (as llama.cpp's converter). */
  private async jsonGrammar(schema: Record<string, unknown>): Promise<LlamaGrammar> {
    const js = await this.llama.createGrammarForJsonSchema(schema as never);
    const text = js.grammar.replace(/^(integer-number-rule ::= .*?) \(\[eE\].*$/m, '$1');
    if (text === js.grammar) return js;
    return this.llama.createGrammar({ grammar: text, stopGenerationTriggers: ['\n'.repeat(4)], trimWhitespaceSuffix: true });
  }
}

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
