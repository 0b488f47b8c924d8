import { SwarmError } from '../../protocol/index.js';
import { driverOptions, sleep } from '../options.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';

/** Settings of the simulated driver (`--driver-opt p=0.6 --driver-opt dependence=0`). */
export interface SimulatedOptions {
  /** Probability that an answer is right. */
  p: number;
  /** Probability that an agent copies the item's shared draw instead of drawing its own (0 = independent). */
  dependence: number;
  latencyMs: number;
}

export function parseSimulatedOptions(raw: Record<string, string>): SimulatedOptions {
  const o = driverOptions<'simulated'>('simulated', raw);
  return { p: o.p, dependence: o.dependence, latencyMs: o.latency_ms };
}

/** A string and a seed hashed to a uniform number in [0, 1): FNV-1a of the string, mixed with the seed by murmur3's finaliser. */
export function uniform(s: string, seed: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193); }
  return (fmix(fmix(h) ^ fmix((seed + 0x9e3779b9) >>> 0)) >>> 0) / 4294967296;
}

function fmix(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h >>> 0;
}

const EXPR = /-?\d+(?:\s*[-+*]\s*-?\d+)+/g;

/** The last integer expression (+, -, *) in a prompt and its value, with the usual precedence. */
export function findExpression(prompt: string): { expr: string; value: number } | undefined {
  const all = prompt.match(EXPR);
  if (!all) return undefined;
  const expr = all.at(-1)!.replace(/\s+/g, '');
  const terms = expr.match(/[-+]?[^-+]+/g) ?? [];
  let value = 0;
  for (const t of terms) {
    const sign = t.startsWith('-') ? -1 : 1;
    value += sign * t.replace(/^[-+]/, '').split('*').reduce((a, f) => a * Number(f), 1);
  }
  return Number.isFinite(value) ? { expr, value } : undefined;
}

/**
 * A driver for testing experiment machinery, never a model: it finds the arithmetic expression in
 * the prompt and answers it rightly with probability `p`, independently per task seed (each agent,
 * each run seed) unless `dependence` makes agents share one draw per item; at temperature 0 the draw
 * is the prompt's own (greedy: one prompt, one answer, whatever the seed). A wrong answer is the
 * item's one distractor (the right value plus a fixed offset), so wrong votes agree with each other:
 * majority-of-k is then exactly the binomial tail. Prompts without an expression get "no answer".
 * Structured roles get a JSON object shaped by their schema (first enum value, the answer in strings).
 */
export class SimulatedDriver implements Driver {
  readonly name = 'simulated';
  readonly options: SimulatedOptions;
  constructor(config: DriverConfig) { this.options = parseSimulatedOptions(config.options); }
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  pids(): number[] { return []; }

  /** The answer text for a prompt and seed (exposed for tests). */
  answer(prompt: string, seed: number, jsonSchema?: Record<string, unknown>): string {
    const found = findExpression(prompt);
    let text = 'I cannot tell (no arithmetic expression in the prompt).';
    if (found) {
      const { p, dependence } = this.options;
      const shared = uniform(found.expr, 0x5eed);
      const own = uniform(found.expr, seed);
      const u = uniform(`dep:${found.expr}`, seed) < dependence ? shared : own;
      const offset = 1 + Math.floor(uniform(`off:${found.expr}`, 7) * 9);
      text = `The answer is ${u < p ? found.value : found.value + offset}.`;
    }
    return jsonSchema ? JSON.stringify(shaped(jsonSchema, text)) : text;
  }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    if (!(await sleep(this.options.latencyMs, opts.signal))) return {};
    // Temperature 0 is greedy decoding: the same prompt gives the same answer whatever the seed.
    const seed = opts.temperature === 0 ? Math.floor(uniform(prompt, 0x6e7ed) * 2 ** 31) : opts.seed ?? Math.floor(Math.random() * 2 ** 31);
    const text = this.answer(prompt, seed, opts.jsonSchema);
    yield text;
    return { tokensIn: prompt.split(/\s+/).filter(Boolean).length, tokensOut: text.split(/\s+/).filter(Boolean).length };
  }
}

/** A JSON value shaped by a schema: objects by their properties, enums by their first value, strings by the answer. */
function shaped(s: Record<string, unknown>, text: string): unknown {
  if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
  if (s.type === 'object' || s.properties) {
    const props = (s.properties ?? {}) as Record<string, Record<string, unknown>>;
    return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, shaped(v, text)]));
  }
  if (s.type === 'array') return [];
  if (s.type === 'number' || s.type === 'integer') return 0;
  if (s.type === 'boolean') return false;
  return text;
}

export function simulatedFactory(config: DriverConfig): Driver { return new SimulatedDriver(config); }
