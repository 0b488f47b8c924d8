import { SwarmError } from '../../protocol/index.js';
import { StopFilter } from '../stop-filter.js';
import { checkKnown, intOption, sleep } from '../options.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';

const KNOWN = ['latency_ms', 'token_ms', 'reply', 'loop', 'fail'] as const;

/** Settings of the echo driver (`--driver-opt k=v`). */
export interface EchoOptions {
  /** Wait this long before answering (a stand-in for prompt processing). */
  latencyMs: number;
  /** Stream the answer word by word, this long per word; 0 sends it in one chunk. */
  tokenMs: number;
  /** Answer this instead of `echo: <prompt>`; `{prompt}` is replaced by the prompt. */
  reply?: string;
  /** Repeat the answer as a line forever (exercises the loop guard). */
  loop: boolean;
  /** Fail every task with SWARM_ERR_TASK_FAILED (exercises retries). */
  fail: boolean;
}

export function parseEchoOptions(o: Record<string, string>): EchoOptions {
  checkKnown('echo', o, KNOWN);
  return {
    latencyMs: intOption('echo', o, 'latency_ms', 0),
    tokenMs: intOption('echo', o, 'token_ms', 0),
    ...(o.reply !== undefined ? { reply: o.reply } : {}),
    loop: o.loop === '1' || o.loop === 'true',
    fail: o.fail === '1' || o.fail === 'true',
  };
}

/**
 * A deterministic engine for tests and benchmarks: answers `echo: <prompt>` (words are tokens),
 * after an optional latency, optionally streamed. No subprocess.
 */
export class EchoDriver implements Driver {
  readonly name = 'echo';
  readonly options: EchoOptions;
  constructor(config: DriverConfig) { this.options = parseEchoOptions(config.options); }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  pids(): number[] { return []; }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    const o = this.options;
    // The signal is read only when there is something to wait for: an answer sent at once needs none.
    if (o.latencyMs > 0 && !(await sleep(o.latencyMs, opts.signal))) return {};
    if (o.fail) throw new SwarmError('SWARM_ERR_TASK_FAILED', 'echo driver set to fail');
    const answer = o.reply !== undefined ? o.reply.split('{prompt}').join(prompt) : `echo: ${prompt}`;
    const tokensIn = countWords(prompt);
    if (o.loop) {
      for (let n = 0; n < 10_000 && !opts.signal?.aborted; n++) {
        yield `${answer}\n`;
        if (!(await sleep(o.tokenMs, opts.signal))) break;
      }
      return { tokensIn, tokensOut: 0 };
    }
    let pieces = o.tokenMs > 0 ? answer.split(/(?<=\s)/) : [answer];
    if (opts.maxTokens !== undefined && countWords(answer) > opts.maxTokens) pieces = limitWords(pieces, answer, opts.maxTokens, o.tokenMs > 0);
    const filter = new StopFilter(opts.stop ?? []);
    let out = 0;
    for (const p of pieces) {
      if (o.tokenMs > 0 && opts.signal?.aborted) return { tokensIn, tokensOut: out };
      const text = filter.push(p);
      out += countWords(p);
      if (text) yield text;
      if (filter.stopped) break;
      if (o.tokenMs > 0 && !(await sleep(o.tokenMs, opts.signal))) return { tokensIn, tokensOut: out };
    }
    const rest = filter.end();
    if (rest) yield rest;
    return { tokensIn, tokensOut: out };
  }
}

/** Words (runs of non-space) in `s`. A regular expression, not a loop over characters: a worker's
 * code is mostly not yet compiled when a batch starts, and the builtin is fast from the first call. */
function countWords(s: string): number { return s.match(/\S+/g)?.length ?? 0; }

/** The first `max` words of the answer, as stream pieces. */
function limitWords(pieces: string[], answer: string, max: number, streamed: boolean): string[] {
  if (streamed) return pieces.slice(0, max);
  const cut = answer.split(/(?<=\s)/).slice(0, max).join('');
  return [cut];
}

export function echoFactory(config: DriverConfig): Driver { return new EchoDriver(config); }
