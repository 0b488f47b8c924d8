/**
 * The engine's own decode loop: one step per batch for every active chat, straight on node-llama-cpp's
 * native context (`initBatch`, `addToBatch` per sequence, `decodeBatch`, then `sampleToken` per
 * sequence), in place of node-llama-cpp's per-sequence evaluation generator, its locks, batch queue and
 * promise chain per token. With a small model those cost 140-160 µs of the main thread per token (the
 * 15M shape: about a sixth of a token's CPU; docs/performance.md), spread with no one hot spot.
 *
 * Each step takes one token of every generating chat, then prompt tokens up to the batch size, added
 * in sequence-id order (llama.cpp cuts a batch of KV streams into runs of consecutive ids). A chat's
 * preparation (prefix copy between sequences, erasing what the prompt does not share) runs between two
 * steps, never beside a decode: it changes KV cells the decode reads. Sampling uses node-llama-cpp's
 * own sampler configuration for the sequence, so a chat's tokens are the library loop's; its text is
 * made as LlamaCompletion makes it (completion-text.ts). The sequences' token lists (node-llama-cpp's
 * `_contextTokens`, `_nextTokenIndex`) are kept as the library keeps them, so the prefix cache, the
 * copies between sequences and the erases work on them unchanged.
 *
 * It reaches into node-llama-cpp 3.x (the context's `_ctx`, the sequences' internals, the binding's
 * AddonSampler); `createStepLoop` returns undefined where they moved, or where the model needs KV
 * checkpoints (recurrent or sliding-window models), and the engine keeps the library loop.
 *
 * Where the addon has it (the self-built one, addon-fused-step.ts), a step is one native call: by
 * default `decodeBatchAndSampleSync`, the decode and every sample on this thread, with a turn of the
 * event loop between steps, so no thread sleeps and wakes per step (on a busy CPU each wake-up waits
 * for a time slice); `fused`, the same in one pool job (one hand-off each way a step). The samples
 * are sampleToken's with the same samplers, so the tokens are the same; without the methods
 * (node-llama-cpp's prebuilt addon, an older build) the step is split.
 */
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import { CompletionText, extraEosTokens, loadTextInternals, type StopReason } from './completion-text.js';
import { decoded, NO_LOGITS, ONE_LOGIT, quiet, samplerConfig, type AddonContext, type AddonSampler, type Job, type LoopStats, type SeqInternals, type StepChat, type StepKind, type Tokens } from './step-job.js';
import { NO_TOKEN, SAMPLE_FAILED } from '../llama-build/addon-fused-step.js';

export type { LoopStats, Sampling, StepChat, StepKind } from './step-job.js';

/** How the loop is made. */
export interface StepLoopOptions {
  /** The step asked for (default sync); where the addon lacks its method, the next one it has. */
  step?: StepKind;
  /**
   * With the `sync` step: asked before each step whether this one overlaps (decodes in a pool job
   * while this thread handles the step before's text), e.g. while a core idles beside the decode's threads.
   */
  overlap?: () => boolean;
}

/** A chat's sampled token whose text waits for the next step's decode, and how a chat ended that way. */
type Deferred = { j: Job; token: Token };
type Ended = StopReason | { error: unknown };

export class StepLoop {
  readonly stats: LoopStats = { runningMs: 0, decodeMs: 0, sampleMs: 0, steps: 0, tokens: 0, generated: 0, overlapped: 0, wasted: 0, handoffs: 0, gapSteps: 0 };
  /** The step count when each sequence's last chat ended, while the loop kept running. */
  private readonly endedAt = new Map<number, number>();
  /** Sampled tokens whose text is handled while the next step decodes (overlapping steps). */
  private deferred: Deferred[] = [];
  /** Whether the last step overlapped: its decode's await was a turn of the event loop. */
  private overlapped = false;
  /** Chats ended so far (finished or failed). */
  private ended = 0;
  private jobs: Job[] = [];
  private readonly arriving: { chat: StepChat; resolve: (r: StopReason) => void; reject: (e: unknown) => void }[] = [];
  private running = false;
  private readonly batchSize: number;
  /**
   * node-llama-cpp runs the decode and every sample as jobs of libuv's pool, first come first served:
   * with one pool thread (the engine's, engine-start.ts) a sample queued after a decode runs after it.
   */
  private readonly pipelined = process.env.UV_THREADPOOL_SIZE === '1';

  /** How each step runs, as the addon allows. */
  readonly step: StepKind;

  private constructor(private readonly context: LlamaContext, private readonly ctx: AddonContext,
    private readonly newSampler: () => AddonSampler, private readonly model: LlamaModel,
    private readonly texts: NonNullable<Awaited<ReturnType<typeof loadTextInternals>>>, private readonly eos: ReadonlySet<Token>, want: StepKind,
    private readonly overlapWhen: (() => boolean) | undefined) {
    this.batchSize = context.batchSize;
    const sync = typeof ctx.decodeBatchAndSampleSync === 'function', fused = typeof ctx.decodeBatchAndSample === 'function';
    this.step = want === 'split' ? 'split' : want === 'overlap' && fused ? 'overlap' : want === 'sync' && sync ? 'sync' : fused ? 'fused' : 'split';
    this.canOverlap = fused;
  }

  private readonly canOverlap: boolean;

  /** Whether a sync step overlaps when its `overlap` option says so (the addon has the pool job it needs). */
  get overlapsWhenIdle(): boolean { return this.step === 'sync' && this.canOverlap && this.overlapWhen !== undefined; }

  /** The loop for `context`, or undefined where node-llama-cpp's internals are not as this expects. */
  static async create(context: LlamaContext, model: LlamaModel, probe: LlamaContextSequence, opts: StepLoopOptions = {}): Promise<StepLoop | undefined> {
    const ctx = (context as unknown as { _ctx?: Partial<AddonContext> })._ctx;
    if (!ctx || typeof ctx.initBatch !== 'function' || typeof ctx.addToBatch !== 'function' || typeof ctx.decodeBatch !== 'function' || typeof ctx.sampleToken !== 'function') return undefined;
    const seq = probe as unknown as Partial<SeqInternals>;
    if (typeof seq._sequenceId !== 'number' || !Array.isArray(seq._contextTokens) || typeof seq._nextTokenIndex !== 'number' || typeof seq._resolveSamplerConfig !== 'function') return undefined;
    if (seq.needsCheckpoints) return undefined;
    const Sampler = (model as unknown as { _llama?: { _bindings?: { AddonSampler?: new (m: unknown) => AddonSampler } } })._llama?._bindings?.AddonSampler;
    const native = (model as unknown as { _model?: unknown })._model;
    if (typeof Sampler !== 'function' || !native) return undefined;
    const texts = await loadTextInternals();
    if (!texts) return undefined;
    return new StepLoop(context, ctx as AddonContext, () => new Sampler(native), model, texts, extraEosTokens(model), opts.step ?? 'sync', opts.overlap);
  }

  /** Run one chat to its end; resolves with why it ended. */
  run(chat: StepChat): Promise<StopReason> {
    return new Promise((resolve, reject) => {
      this.arriving.push({ chat, resolve, reject });
      if (!this.running) void this.spin();
    });
  }

  private async spin(): Promise<void> {
    this.running = true;
    const t0 = performance.now();
    try {
      while (this.jobs.length > 0 || this.arriving.length > 0) {
        if (this.arriving.length > 0) await this.admit();
        if (this.jobs.length > 0) {
          const ended = this.ended;
          await this.runStep();
          // A step on this thread returns without a turn of the event loop: one now, so that sockets
          // (new chats, aborts, text to the workers) are served between steps. After an overlapping
          // step, only where a chat ended in it: the chat sent ahead behind it reaches this loop a few
          // promise hops after that end, and without the turn the next step would leave its sequence out.
          if ((this.step === 'sync' && !this.overlapped) || (this.overlapped && this.ended !== ended)) await new Promise<void>((r) => setImmediate(r));
        }
      }
    } finally {
      // Idle, no sequence waits on a step: a chat after this is no hand-off within a run of steps.
      this.endedAt.clear();
      this.running = false;
      this.stats.runningMs += performance.now() - t0;
    }
  }

  /** Prepare the chats that arrived (no decode runs meanwhile) and let them into the next step. */
  private async admit(): Promise<void> {
    const arrived = this.arriving.splice(0);
    for (const a of arrived) {
      let sampler: AddonSampler | undefined;
      try {
        const { tokens, start } = await a.chat.prepare();
        const seq = a.chat.sequence as unknown as SeqInternals;
        if (seq._nextTokenIndex !== start) throw new Error(`sequence holds ${seq._nextTokenIndex} tokens where the prompt's evaluation starts at ${start}`);
        const pending = tokens.slice(start);
        if (pending.length === 0) throw new Error('nothing to evaluate');
        sampler = this.newSampler();
        sampler.applyConfig(samplerConfig(seq, a.chat, this.model));
        const text = new CompletionText(this.model, this.texts, this.eos, {
          stops: a.chat.stops, grammar: a.chat.grammar, maxTokens: a.chat.maxTokens,
          onText: (t) => { if (t) a.chat.onText(t); }, onTokens: a.chat.onTokens,
        });
        const job: Job = { chat: a.chat, seq, id: seq._sequenceId, pending, sampler, text, take: 0, logit: -1, resolve: a.resolve, reject: a.reject };
        // In sequence-id order: the order the batch is built in.
        const e = this.endedAt.get(job.id);
        if (e !== undefined) { this.stats.handoffs++; this.stats.gapSteps += this.stats.steps - e; this.endedAt.delete(job.id); }
        let i = this.jobs.length;
        while (i > 0 && this.jobs[i - 1]!.id > job.id) i--;
        this.jobs.splice(i, 0, job);
      } catch (err) {
        sampler?.dispose();
        a.reject(err);
      }
    }
  }

  /** One batch: a token of every generating chat, prompt tokens in what room is left, one decode, the samples. */
  private async runStep(): Promise<void> {
    const ctxSize = this.context.contextSize;
    const overlap = this.canOverlap && (this.step === 'overlap' || (this.step === 'sync' && this.overlapWhen?.() === true));
    this.overlapped = false;
    // Text left from an overlapping step, where this one does not overlap: handled before it.
    if (!overlap) this.settle();
    // Chats aborted while their prompt is still evaluating end now; a generating one ends at its next token, as in the library.
    for (const j of [...this.jobs]) if (j.chat.signal.aborted && j.pending.length > 1) this.finish(j, 'abort');
    const live = this.jobs;
    let room = this.batchSize;
    let total = 0;
    for (const j of live) { j.take = j.pending.length === 1 && room > 0 ? 1 : 0; room -= j.take; total += j.take; }
    for (const j of live) if (j.pending.length > 1 && room > 0) { j.take = Math.min(j.pending.length, room); room -= j.take; total += j.take; }
    if (total === 0) { this.settle(); return; }
    const ctx = this.ctx;
    const inBatch: Job[] = [];
    try {
      ctx.initBatch(total);
      for (const j of live) {
        const n = j.take;
        if (n === 0) continue;
        const whole = n === j.pending.length;
        const tokens = n === 1 ? Uint32Array.of(j.pending[0]!) : Uint32Array.from(j.pending.slice(0, n));
        const idx = ctx.addToBatch(j.id, j.seq._nextTokenIndex, tokens, !whole ? NO_LOGITS : n === 1 ? ONE_LOGIT : Uint32Array.of(n - 1));
        j.logit = whole ? idx[0]! : -1;
        inBatch.push(j);
      }
    } catch (err) {
      // The text of the step before first: a chat it ends was not to be in this batch.
      this.settle();
      for (const j of inBatch) if (this.jobs.includes(j)) this.fail(j, err);
      return;
    }
    this.stats.steps++;
    this.stats.tokens += total;
    if (overlap) return this.overlapStep(inBatch, ctxSize);
    if (this.step !== 'split') return this.fusedStep(inBatch, ctxSize);
    let decoding: Promise<void>;
    try { decoding = ctx.decodeBatch(); } catch (err) {
      for (const j of inBatch) this.fail(j, err);
      return;
    }
    const tDecode = performance.now();
    // With one pool thread the samples, queued behind the decode, run right after it without a round
    // trip through this thread (one wake-up less per step); with more they must wait for it.
    const samples = new Map<Job, Promise<Token | -1>>();
    if (this.pipelined) for (const j of inBatch) if (j.logit >= 0) samples.set(j, quiet(ctx.sampleToken(j.logit, j.sampler)));
    try {
      await decoding;
    } catch (err) {
      // Samples queued behind a failed decode read stale logits: their results are dropped (and their
      // samplers freed once they have run).
      for (const j of inBatch) this.fail(j, err, samples.get(j));
      return;
    }
    const tSample = performance.now();
    this.stats.decodeMs += tSample - tDecode;
    let waiting = 0;
    let wake: (() => void) | undefined;
    const settled = (): void => { if (--waiting === 0) wake?.(); };
    for (const j of inBatch) {
      if (!decoded(j)) continue;
      waiting++;
      // Each sample is handled as it comes back, while the next ones are sampled.
      (samples.get(j) ?? ctx.sampleToken(j.logit, j.sampler)).then((token) => {
        if (token === -1) this.fail(j, new Error('Failed to sample next token'));
        else this.sampled(j, token, ctxSize);
        settled();
      }, (err: unknown) => { this.fail(j, err); settled(); });
    }
    this.stats.generated += waiting;
    if (waiting > 0) await new Promise<void>((r) => { wake = r; });
    this.stats.sampleMs += performance.now() - tSample;
  }

  /**
   * The step as one native call: the decode, then every sample, on this thread or in one pool job;
   * the tokens come back together and are handled in the batch's order.
   */
  private async fusedStep(inBatch: Job[], ctxSize: number): Promise<void> {
    const sampling = inBatch.filter((j) => j.logit >= 0);
    const t0 = performance.now();
    let tokens: Tokens;
    try {
      const logits = Uint32Array.from(sampling, (j) => j.logit), samplers = sampling.map((j) => j.sampler);
      tokens = this.step === 'sync' ? this.ctx.decodeBatchAndSampleSync!(logits, samplers) : await this.ctx.decodeBatchAndSample!(logits, samplers);
    } catch (err) {
      for (const j of inBatch) this.fail(j, err);
      return;
    }
    const t1 = performance.now();
    this.stats.decodeMs += t1 - t0;
    for (const j of inBatch) decoded(j);
    sampling.forEach((j, i) => { const token = this.tokenOf(j, tokens, i); if (token !== undefined) this.sampled(j, token, ctxSize); });
    this.stats.generated += sampling.length;
    this.stats.sampleMs += performance.now() - t1;
  }

  /**
   * The step in one pool job while this thread handles the text of the step before: the text of a
   * chat (its detokenizing, stop strings, the text sent on) is no longer between two decodes, where
   * with many decode threads each step's serial part idles all of them. The step before's chats went
   * on into this step unless their token alone said they end (sampledAhead); one whose text ends it
   * (a stop string, an abort) had a token decoded and sampled too many here: dropped, and its
   * sequence's token list holds it as its KV cache does, so the prefix cache stays right.
   */
  private async overlapStep(inBatch: Job[], ctxSize: number): Promise<void> {
    const sampling = inBatch.filter((j) => j.logit >= 0);
    const t0 = performance.now();
    let job: Promise<Tokens>;
    try {
      job = quiet(this.ctx.decodeBatchAndSample!(Uint32Array.from(sampling, (j) => j.logit), sampling.map((j) => j.sampler)));
    } catch (err) {
      this.settle();
      for (const j of inBatch) if (this.jobs.includes(j)) this.fail(j, err);
      return;
    }
    this.overlapped = true;
    this.stats.overlapped++;
    const ended = this.drain();
    const t1 = performance.now();
    let tokens: Tokens;
    try {
      tokens = await job;
    } catch (err) {
      // A chat whose text had ended before this step had only its token past the end in it: it ends as its text said.
      for (const [j, e] of ended) this.end(j, e);
      for (const j of inBatch) if (this.jobs.includes(j)) this.fail(j, err);
      return;
    }
    const t2 = performance.now();
    // The decode's time is what this thread waited for it; the text before and after counts as samples.
    this.stats.decodeMs += t2 - t1;
    for (const j of inBatch) decoded(j);
    let dropped = 0;
    sampling.forEach((j, i) => {
      if (ended.has(j)) { dropped++; return; }
      const token = this.tokenOf(j, tokens, i);
      if (token !== undefined) this.sampledAhead(j, token, ctxSize);
    });
    for (const [j, e] of ended) this.end(j, e);
    this.stats.wasted += dropped;
    this.stats.generated += sampling.length - dropped;
    this.stats.sampleMs += (t1 - t0) + (performance.now() - t2);
  }

  /** Job `j`'s token of a one-call step (the `i`th of `tokens`), or undefined where its sample failed (the chat fails). */
  private tokenOf(j: Job, tokens: Tokens, i: number): Token | undefined {
    const token = tokens[i];
    if (token === SAMPLE_FAILED) this.fail(j, new Error(tokens.errors?.[i] || 'Failed to sample next token'));
    else if (token === NO_TOKEN || token === undefined) this.fail(j, new Error('Failed to sample next token'));
    else return token as Token;
    return undefined;
  }

  /**
   * A token whose text can wait for the next step's decode: the chat goes on with it, unless the token
   * alone says the chat ends here (end of generation, its limit, a full context, an abort): then now.
   */
  private sampledAhead(j: Job, token: Token, ctxSize: number): void {
    if (j.chat.signal.aborted || j.seq._nextTokenIndex >= ctxSize - 1 || j.text.mayEnd(token)) { this.sampled(j, token, ctxSize); return; }
    j.pending = [token];
    this.deferred.push({ j, token });
  }

  /** The deferred tokens' text, in order; the chats it ends (not yet removed: a decode may hold their samplers). */
  private drain(): Map<Job, Ended> {
    const ended = new Map<Job, Ended>();
    if (this.deferred.length === 0) return ended;
    const list = this.deferred;
    this.deferred = [];
    for (const { j, token } of list) {
      if (!this.jobs.includes(j)) continue;
      try {
        const reason = j.text.push(token, j.chat.signal.aborted);
        if (reason) ended.set(j, reason);
      } catch (err) { ended.set(j, { error: err }); }
    }
    return ended;
  }

  /** The deferred tokens' text now, with no decode under way: the chats it ends end. */
  private settle(): void {
    for (const [j, e] of this.drain()) this.end(j, e);
  }

  private end(j: Job, e: Ended): void {
    if (!this.jobs.includes(j)) return;
    if (typeof e === 'string') this.finish(j, e);
    else this.fail(j, e.error);
  }

  private sampled(j: Job, token: Token, ctxSize: number): void {
    let reason: StopReason | undefined;
    try { reason = j.text.push(token, j.chat.signal.aborted); } catch (err) { this.fail(j, err); return; }
    // A full context ends the chat (the library would shift it; the engine disables that).
    if (!reason && j.seq._nextTokenIndex >= ctxSize - 1) reason = 'maxTokens';
    if (reason) this.finish(j, reason);
    else j.pending = [token];
  }

  private remove(j: Job, inUse?: Promise<unknown>): void {
    this.ended++;
    this.endedAt.set(j.id, this.stats.steps);
    const i = this.jobs.indexOf(j);
    if (i >= 0) this.jobs.splice(i, 1);
    if (inUse) void inUse.finally(() => j.sampler.dispose()).catch(() => {});
    else j.sampler.dispose();
  }

  private finish(j: Job, reason: StopReason): void { this.remove(j); j.resolve(reason); }
  private fail(j: Job, err: unknown, inUse?: Promise<unknown>): void { this.remove(j, inUse); j.reject(err); }
}
