/**
 * One decode step for every generating sequence. node-llama-cpp batches whatever is queued when its
 * dispatch runs, and keeps dispatching while anything is queued, holding the context lock throughout.
 * Three things follow, measured on the 110M shape with 8 sequences (0.57x a bare llama-server's
 * tokens per CPU-second before, 0.97x after):
 *  - sampling results arrive one by one (one native job per sequence), so each step's batch held 7
 *    of the 8 sequences and the eighth went into a batch of its own;
 *  - with one KV stream per sequence (node-llama-cpp's fixed `kv_unified = false`) llama.cpp cuts a
 *    batch into micro-batches of consecutive sequence ids, so tokens queued in the order 1,2,…,7,0 cost
 *    two passes over the weights, and tile sizes that do not fill the matmul kernels;
 *  - a new chat's prompt erase waits for the context lock, which a busy loop never releases, so its
 *    first token waited for the other sequences' generations to end.
 * The gate holds each queued decode until every sequence that is mid-generation has queued its next
 * one (or a short bound passes), then hands them to the context at once, sorted by sequence id. In
 * between the dispatch loop finds nothing queued and releases the lock, so erases get in.
 * It reaches into node-llama-cpp's internals (3.x: `_decodeTokens`, `_sequenceId`); `install` checks
 * they are there and otherwise leaves the context as it is.
 */
import type { LlamaContext, LlamaContextSequence } from 'node-llama-cpp';

interface QueuedItem { sequenceId: number; tokens: readonly number[] }
type DecodeFn = (item: QueuedItem, mapper: unknown) => Promise<unknown>;
interface Internals { _decodeTokens?: DecodeFn; dispatchPendingBatch(): void }

/** Where a sequence is: its decode held here, in the context's batch, or between two decodes. */
type State = 'held' | 'step' | 'prompt' | 'between';

export interface BatchGate {
  /** The generation on this sequence has ended: it will queue nothing more, so no step waits for it. */
  end(sequence: LlamaContextSequence): void;
}

/** The sequence id node-llama-cpp uses for this sequence in batches. */
export function sequenceId(s: LlamaContextSequence): number | undefined {
  const id = (s as unknown as { _sequenceId?: unknown })._sequenceId;
  return typeof id === 'number' ? id : undefined;
}

/**
 * Gate the decodes of `context`. `straggleMs` bounds the wait for a sequence that is between decodes
 * (sampled, not yet queued again): on a loaded machine its continuation may be late, and the others
 * must not wait long for it.
 */
export function installBatchGate(context: LlamaContext, straggleMs = 3): BatchGate | undefined {
  const ctx = context as unknown as Internals;
  if (typeof ctx._decodeTokens !== 'function' || typeof ctx.dispatchPendingBatch !== 'function') return undefined;
  const decode = ctx._decodeTokens.bind(context);
  const state = new Map<number, State>();
  let held: { id: number; item: QueuedItem; mapper: unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void }[] = [];
  let timer: NodeJS.Timeout | undefined;

  const release = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (held.length === 0) return;
    const batch = held.sort((a, b) => a.id - b.id);
    held = [];
    for (const h of batch) {
      // A one-token decode is a generation step: it ends with this batch, and the next step waits for
      // it. A prompt may span several batches: nothing waits for it.
      const st: State = h.item.tokens.length === 1 ? 'step' : 'prompt';
      state.set(h.id, st);
      const settled = (): void => { if (state.get(h.id) === st) state.set(h.id, 'between'); };
      decode(h.item, h.mapper).then((v) => { settled(); h.resolve(v); check(); }, (e: unknown) => { settled(); h.reject(e); check(); });
    }
    ctx.dispatchPendingBatch();
  };

  const check = (): void => {
    if (held.length === 0) return;
    let between = false;
    for (const s of state.values()) {
      // A step in flight settles when its batch ends, and this runs again then.
      if (s === 'step') { clearTimeout(timer); timer = undefined; return; }
      if (s === 'between') between = true;
    }
    if (!between) release();
    else timer ??= setTimeout(release, straggleMs);
  };

  ctx._decodeTokens = (item, mapper) => new Promise((resolve, reject) => {
    state.set(item.sequenceId, 'held');
    held.push({ id: item.sequenceId, item, mapper, resolve, reject });
    check();
  });

  return {
    end(sequence) {
      const id = sequenceId(sequence);
      if (id === undefined) return;
      state.delete(id);
      check();
    },
  };
}
