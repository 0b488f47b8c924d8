import type { Llama, LlamaGrammar } from 'node-llama-cpp';
import type { HostChatOptions } from './messages.js';

/** Grammars compile once per text; a few distinct ones are kept (tasks tend to repeat them). */
/** Used by the per-worker engine host and the batched one. */
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

  /**
   * node-llama-cpp's grammar for a JSON schema, except that its integers may not have an exponent
   * (it allows `-5e-20` for "integer", which parses but is not an integer; llama.cpp's converter does not).
   */
  private async jsonGrammar(schema: Record<string, unknown>): Promise<LlamaGrammar> {
    const js = await this.llama.createGrammarForJsonSchema(schema as never);
    const text = js.grammar.replace(/^(integer-number-rule ::= .*?) \(\[eE\].*$/m, '$1');
    if (text === js.grammar) return js;
    return this.llama.createGrammar({ grammar: text, stopGenerationTriggers: ['\n'.repeat(4)], trimWhitespaceSuffix: true });
  }
}
