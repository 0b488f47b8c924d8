import { SwarmError } from '../../protocol/index.js';
import { StopFilter } from '../stop-filter.js';
import { driverOptions, sleep } from '../options.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';

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

export function parseEchoOptions(raw: Record<string, string>): EchoOptions {
  const o = driverOptions<'echo'>('echo', raw);
  return {
    latencyMs: o.latency_ms,
    tokenMs: o.token_ms,
    // Given empty, an answer that is empty (not the default one).
    ...(raw.reply !== undefined ? { reply: raw.reply } : {}),
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

  /** Without latency, streaming or a loop the answer is ready at once: what `chat` yields, as a list. */
  answerNow(prompt: string, opts: ChatOptions = {}): { chunks: string[]; stats: ChatStats } | undefined {
    const o = this.options;
    if (o.latencyMs > 0 || o.tokenMs > 0 || o.loop) return undefined;
    if (o.fail) throw new SwarmError('SWARM_ERR_TASK_FAILED', 'echo driver set to fail');
    return whole(prompt, o, opts);
  }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    const o = this.options;
    // The signal is read only when there is something to wait for: an answer sent at once needs none.
    if (o.latencyMs > 0 && !(await sleep(o.latencyMs, opts.signal))) return {};
    if (o.fail) throw new SwarmError('SWARM_ERR_TASK_FAILED', 'echo driver set to fail');
    if (o.tokenMs <= 0 && !o.loop) {
      const { chunks, stats } = whole(prompt, o, opts);
      for (const c of chunks) yield c;
      return stats;
    }
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

/**
 * The answer in one piece (no streaming), cut at `maxTokens` words, through the stop filter: the
 * chunks to yield and the counts (tokensOut counts the piece's words, as the stream counts each piece's).
 */
function whole(prompt: string, o: EchoOptions, opts: ChatOptions): { chunks: string[]; stats: ChatStats } {
  const answer = o.reply !== undefined ? o.reply.split('{prompt}').join(prompt) : `echo: ${prompt}`;
  const tokensIn = countWords(prompt);
  // `echo: ` is one word and ends in a space, so the default answer has one word more than its prompt.
  const words = o.reply === undefined ? tokensIn + 1 : countWords(answer);
  let piece = answer;
  let tokensOut = words;
  if (opts.maxTokens !== undefined && words > opts.maxTokens) { piece = limitWords([answer], answer, opts.maxTokens, false)[0]!; tokensOut = countWords(piece); }
  const stats = { tokensIn, tokensOut };
  // Without stop strings the filter passes the piece through whole: no filter to build.
  if (!opts.stop?.length) return { chunks: piece ? [piece] : [], stats };
  // What a stream of this one piece gives: the filter's output, then (unless it stopped) what it held back.
  const filter = new StopFilter(opts.stop);
  const chunks: string[] = [];
  const text = filter.push(piece);
  if (text) chunks.push(text);
  const rest = filter.end();
  if (rest) chunks.push(rest);
  return { chunks, stats };
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
