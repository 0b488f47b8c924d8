import type { TaskRecord } from './task.js';

/**
 * What happened to a task, in the order it happened. `accepted`, `done`, `failed` and `evicted` come only once
 * the journal record is durable; `leased`, `requeued` and `ready` are not journaled (a lease is not durable
 * state: after a restart every unfinished task is queued).
 */
export type StoreEvent =
  | { type: 'accepted'; rec: TaskRecord }
  | { type: 'leased'; rec: TaskRecord }
  | { type: 'requeued'; rec: TaskRecord }
  /** A queued task that was held (awaiting a worker's handback) may be leased again. */
  | { type: 'ready'; rec: TaskRecord }
  | { type: 'done'; rec: TaskRecord }
  | { type: 'failed'; rec: TaskRecord }
  /**
   * Finished tasks left the hot state for the results archive (the retention horizon), after the
   * journal says so: replicas drop them too. Their ids stay known for the duplicate window.
   */
  | { type: 'evicted'; ids: string[] };

/** A typed event stream: subscribe returns its unsubscribe; a listener that throws does not stop the others. */
export class StoreEvents {
  private readonly listeners = new Set<(e: StoreEvent) => void>();

  subscribe(fn: (e: StoreEvent) => void): () => void {
    // A wrapper per subscription, so the same function subscribed twice is two subscriptions.
    const own = (e: StoreEvent) => fn(e);
    this.listeners.add(own);
    return () => { this.listeners.delete(own); };
  }

  /** Listeners subscribed now (a leak shows here). */
  get size(): number { return this.listeners.size; }

  emit(e: StoreEvent): void {
    if (this.listeners.size === 0) return;
    for (const fn of this.listeners) {
      try { fn(e); } catch { /* a listener's bug must not stop the others */ }
    }
  }
}
