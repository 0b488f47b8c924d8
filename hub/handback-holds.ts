import type { Logger } from 'pino';
import type { WorkerEntry } from './registry.js';
import type { TaskStore } from './store.js';

/**
 * Tasks a reconciling worker offered and the hub wants, leased to no one until its handback brings
 * them. Leased meanwhile, each would run a second time: a restarted hub dispatches its replayed queue
 * at once, the worker given a task may hold no result for it (the agents of a process share no
 * replica), and a long gossip run hands back thousands of results over seconds, the oldest tasks
 * first: the very ones the hub dispatches first. A hold ends when the entry arrives (recorded, or to
 * be run again), when the worker is back in star mode or leaves, or after `holdMs` without a frame
 * of its handback: a stalled handback costs a re-run, never a result.
 */
export class HandbackHolds {
  private readonly byWorker = new Map<WorkerEntry, { ids: Set<string>; timer?: NodeJS.Timeout }>();

  constructor(
    private readonly store: () => TaskStore,
    private readonly log: Logger,
    /** Held tasks became ready to lease again. */
    private readonly onReady: () => void,
    /** A worker's handback frame times out after 15 s on its side: past that, no more is coming. */
    private readonly holdMs = 15_000,
  ) {}

  /** Tasks held now. */
  get size(): number { let n = 0; for (const a of this.byWorker.values()) n += a.ids.size; return n; }

  /** `w` offered these ids and the hub wants them: hold the ones queued. */
  hold(w: WorkerEntry, ids: readonly string[]): void {
    let a = this.byWorker.get(w);
    if (!a) { a = { ids: new Set() }; this.byWorker.set(w, a); }
    for (const id of ids) if (!a.ids.has(id) && this.store().awaitHandback(id)) a.ids.add(id);
    if (!a.ids.size) { this.byWorker.delete(w); return; }
    this.touch(w);
  }

  /** A frame of `w`'s handback arrived: its holds last another `holdMs`. */
  touch(w: WorkerEntry): void {
    const a = this.byWorker.get(w);
    if (!a) return;
    clearTimeout(a.timer);
    a.timer = setTimeout(() => {
      this.log.warn({ worker: w.id, tasks: a.ids.size }, 'handback stalled: the tasks it offered are dispatched again');
      this.release(w);
    }, this.holdMs);
    a.timer.unref();
  }

  /** Let `w`'s held tasks go: those in `ids` (its handback brought them), or all of them. */
  release(w: WorkerEntry, ids?: readonly string[]): void {
    const a = this.byWorker.get(w);
    if (!a) return;
    let ready = false;
    for (const id of ids ?? [...a.ids]) if (a.ids.delete(id) && this.store().handbackEnded(id)) ready = true;
    if (!a.ids.size) { clearTimeout(a.timer); this.byWorker.delete(w); }
    if (ready) this.onReady();
  }

  stop(): void {
    for (const a of this.byWorker.values()) clearTimeout(a.timer);
    this.byWorker.clear();
  }
}
