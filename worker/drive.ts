import { SwarmError, type Receipt } from '../protocol/index.js';
import { LoopGuard, type AheadTicket, type ChatOptions, type Driver } from '../drivers/index.js';
import type { LazyAbort } from './lazy-abort.js';
import type { AgentEngine } from './agent-engine.js';

/** What one driver run needs (a TASK_REQ's payload, or a replicated spec in gossip mode). */
export interface TaskParams {
  task_id: string; prompt: string; stop: string[]; attempt: number; max_tokens?: number; temperature?: number;
  seed?: number; grammar?: string; json_schema?: Record<string, unknown>; timeout_ms?: number;
  /** false: nobody watches the answer as it is written (TASK_REQ `stream`). */
  stream?: boolean;
}

/** What a run gives: the whole text, its last chunk (held back from `onChunk`), the receipt. */
export interface Driven { full: string; last: string; receipt: Receipt }

/** What a run uses of its agent. */
export interface DriveDeps { driver: Driver; engine: AgentEngine; workerId: string; loopRepeats: number }

/**
 * How a run meets the driver beyond its task (ChatOptions says what each is): `ahead`, the chat handed
 * to the engine when the task was queued; `endsWithinMs` and `onEnding`, the word that it ends soon.
 */
export type DriveExtras = Pick<ChatOptions, 'ahead' | 'endsWithinMs' | 'onEnding'>;

/**
 * One driver run with the task's timeout and the loop guard. `onChunk` gets every chunk but the
 * last (held back so a one-chunk answer is one message); the result has the last and the whole.
 * A chat handed to the engine ahead (`x.ahead`) starts the task's clock (timeout, duration) here all
 * the same, when its turn comes.
 */
export async function drive(d: DriveDeps, p: TaskParams, abort: LazyAbort, onChunk?: (text: string) => void, x: DriveExtras = {}): Promise<Driven> {
  const timer = p.timeout_ms ? setTimeout(() => abort.abort(new SwarmError('SWARM_ERR_TASK_TIMEOUT', `task ran past ${p.timeout_ms} ms`)), p.timeout_ms) : undefined;
  const started = performance.now();
  const startedAt = Date.now();
  let ttft: number | undefined;
  let pending: string | undefined;
  const parts: string[] = [];
  const guard = new LoopGuard({ maxRepeats: d.loopRepeats });
  try {
    // A chat handed ahead is the driver's until chat() takes it over: given back if it never will be.
    await d.engine.ready().catch((err: unknown) => { if (x.ahead) d.driver.withdrawAhead?.(x.ahead); throw err; });
    const chatOpts = new TaskChatOptions(p, abort, x);
    // A driver that has the answer at once gives it as a list: no async generator, no await a chunk.
    const now = d.driver.answerNow?.(p.prompt, chatOpts);
    const gen = now ? undefined : d.driver.chat(p.prompt, chatOpts);
    let stats: { tokensIn?: number; tokensOut?: number; tokensCached?: number; ttftMs?: number } | void;
    for (let i = 0; ; i++) {
      let chunk: string;
      if (gen) {
        const r = await gen.next();
        if (r.done) { stats = r.value; break; }
        chunk = r.value;
      } else {
        if (i === now!.chunks.length) { stats = now!.stats; break; }
        chunk = now!.chunks[i]!;
      }
      if (abort.aborted) { if (gen) await gen.return(undefined); throw abort.reason; }
      ttft ??= performance.now() - started;
      if (guard.push(chunk)) {
        if (gen) await gen.return(undefined);
        await d.engine.restart();
        throw new SwarmError('SWARM_ERR_LOOP_DETECTED', 'the same output line repeated more than the loop guard allows');
      }
      if (pending !== undefined) onChunk?.(pending);
      pending = chunk;
      parts.push(chunk);
    }
    if (abort.aborted) throw abort.reason;
    const duration = performance.now() - started;
    const tokensOut = stats?.tokensOut;
    const finishedAt = Date.now();
    // An engine that sends its text in late pieces says when the first token came.
    const ttftMs = stats?.ttftMs !== undefined ? round(stats.ttftMs) : ttft === undefined ? undefined : round(ttft);
    const tokensPerS = tokensOut !== undefined && duration > 0 ? round(tokensOut / (duration / 1000)) : undefined;
    // Two literals rather than a spread of an optional field: a literal with a spread in it is
    // built key by key, and this runs once a task. The keys keep the order the hub has always seen.
    const receipt: Receipt = stats?.tokensCached === undefined
      ? { started_at: startedAt, finished_at: finishedAt, duration_ms: round(duration), ttft_ms: ttftMs,
        tokens_in: stats?.tokensIn, tokens_out: tokensOut,
        tokens_per_s: tokensPerS, worker: d.workerId, driver: d.driver.name, attempt: p.attempt }
      : { started_at: startedAt, finished_at: finishedAt, duration_ms: round(duration), ttft_ms: ttftMs,
        tokens_in: stats.tokensIn, tokens_out: tokensOut, tokens_cached: stats.tokensCached,
        tokens_per_s: tokensPerS, worker: d.workerId, driver: d.driver.name, attempt: p.attempt };
    return { full: parts.length === 1 ? parts[0]! : parts.join(''), last: pending ?? '', receipt };
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/**
 * A task's ChatOptions. A class, not an object literal: the lazy `signal` is a getter, and a literal
 * with a getter in it is built by the runtime, slowly, once a task; here the getter is on the prototype.
 * No driver copies its options (a spread would leave `signal` behind).
 */
class TaskChatOptions implements ChatOptions {
  readonly stop: string[];
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly seed?: number;
  readonly grammar?: string;
  readonly jsonSchema?: Record<string, unknown>;
  readonly stream: boolean;
  readonly ahead?: AheadTicket;
  readonly endsWithinMs?: number;
  readonly onEnding?: () => void;
  /** `abort` undefined: no signal (a chat handed to the engine ahead of its turn, whose task has not started). */
  constructor(p: TaskParams, private readonly abort: LazyAbort | undefined, x: DriveExtras) {
    this.stop = p.stop; this.maxTokens = p.max_tokens; this.temperature = p.temperature; this.seed = p.seed;
    this.grammar = p.grammar; this.jsonSchema = p.json_schema; this.stream = p.stream !== false;
    if (x.ahead) this.ahead = x.ahead;
    if (x.endsWithinMs) this.endsWithinMs = x.endsWithinMs;
    if (x.onEnding) this.onEnding = x.onEnding;
  }
  /** Made when the driver first reads it: a driver that answers at once never does. */
  get signal(): AbortSignal | undefined { return this.abort?.signal; }
}

/** A task's generation settings, for a chat handed to the engine ahead of its turn. */
export function aheadChatOptions(p: TaskParams, endsWithinMs: number): ChatOptions {
  return new TaskChatOptions(p, undefined, { endsWithinMs });
}

function round(x: number): number { return Math.round(x * 100) / 100; }
