import type { Logger } from 'pino';
import type { WorkerEntry } from './registry.js';
import type { TaskStore } from './store.js';

/** Time as the holds read it: the real one, or a test's driven clock. */
export interface HoldClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realClock: HoldClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => { const h = setTimeout(fn, ms); h.unref(); return h; },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface HoldOptions {
  /**
   * A hold ends this long after the offer, or after the last frame that brought a held entry: a
   * worker's handback frame times out after 15 s on its side, so past that no more is coming.
   */
  idleMs?: number;
  /** A hold ends this long after the offer whatever arrives: the fixed bound of one handback. */
  maxMs?: number;
  clock?: HoldClock;
}

/** One connection's hold window: its held ids, when it began, when it last brought a held entry. */
interface Window { ids: Set<string>; since: number; progress: number; timer?: unknown }

/**
 * Tasks a reconciling worker offered and the hub wants, leased to no one until its handback brings
 * them. Leased meanwhile, each would run a second time: a restarted hub dispatches its replayed queue
 * at once, the worker given a task may hold no result for it (the agents of a process share no
 * replica), and a long gossip run hands back thousands of results over seconds, the oldest tasks
 * first: the very ones the hub dispatches first.
 *
 * An offer is only a claim, so a hold is bounded: it ends when the entry arrives (recorded, or to be
 * run again), when the worker is back in star mode or leaves, `idleMs` after the offer or the last
 * frame that brought a held entry (an empty frame does not count), and `maxMs` after the offer in
 * any case. A connection gets one hold window: once it is over, that connection's offers hold
 * nothing (they are still answered), so no worker keeps the queue from idle workers by offering
 * again and again. A stalled or cut-short handback costs a re-run, never a result.
 */
export class HandbackHolds {
  private readonly byWorker = new Map<WorkerEntry, Window>();
  /** The connection each held id is awaited from. */
  private readonly owner = new Map<string, WorkerEntry>();
  /**
   * Ids asked for that could not be held (leased already, as a restarted hub leases its replayed
   * queue at once, or unknown here): the connection asked and when, so a second offerer is not asked
   * for the same entry while the first may still bring it. No window: nothing is kept from dispatch.
   */
  private readonly asked = new Map<string, { w: WorkerEntry; at: number }>();
  private readonly askedOf = new Map<WorkerEntry, Set<string>>();
  /** Ids whose entry came but was refused as another connected worker's live lease, and when (oldest first). */
  private readonly leaseAnswered = new Map<string, number>();
  /** Connections whose hold window has begun (and, when not in `byWorker`, ended). */
  private readonly opened = new WeakSet<WorkerEntry>();
  private readonly idleMs: number;
  private readonly maxMs: number;
  private readonly clock: HoldClock;
  /** Holds ended by a bound (idle or fixed), not by their entries arriving. */
  expired = 0;

  constructor(
    private readonly store: () => Pick<TaskStore, 'awaitHandback' | 'handbackEnded'>,
    private readonly log: Logger,
    /** Held tasks became ready to lease again. */
    private readonly onReady: () => void,
    opts: HoldOptions = {},
  ) {
    this.idleMs = opts.idleMs ?? 15_000;
    this.maxMs = Math.max(this.idleMs, opts.maxMs ?? 60_000);
    this.clock = opts.clock ?? realClock;
  }

  /** Tasks held now. */
  get size(): number { let n = 0; for (const a of this.byWorker.values()) n += a.ids.size; return n; }

  /**
   * `w` offered these ids and the hub lacks them: hold the ones queued, within its one window. Answers
   * the ids to ask `w` for: all but those another connection's hold awaits already, or, for ids that
   * cannot be held (leased, or unknown here), that another connection was asked for less than `idleMs`
   * ago and has not brought yet. Two workers offer the same result when their views of who is alive
   * differ (each result is handed back by the member that produced it, or by every survivor once that
   * member looks gone); asking both sends it twice. If the one asked does not bring it, its hold ends
   * and the task runs again (a re-run, not a loss); a leased one is answered by its lease.
   */
  hold(w: WorkerEntry, ids: readonly string[]): string[] {
    const now = this.clock.now();
    this.pruneLeaseAnswered(now);
    const want = ids.filter((id) => {
      const o = this.owner.get(id);
      if (o !== undefined) return o === w;
      const k = this.asked.get(id);
      if (k !== undefined && k.w !== w && now - k.at < this.idleMs) return false;
      return !this.leaseAnswered.has(id);
    });
    let a = this.byWorker.get(w);
    if (!a) {
      // Its one window is over: its offers hold nothing and keep no other offerer from being asked.
      if (this.opened.has(w)) return want;
      a = { ids: new Set(), since: now, progress: now };
    }
    for (const id of want) {
      this.unask(id);
      if (a.ids.has(id) || this.store().awaitHandback(id)) { a.ids.add(id); this.owner.set(id, w); continue; }
      this.ask(w, id, now);
    }
    if (a.ids.size && !this.byWorker.has(w)) { this.byWorker.set(w, a); this.opened.add(w); this.arm(w, a); }
    return want;
  }

  /**
   * Entries that came but were refused as another connected worker's live lease: that worker's answer
   * is the one to record, so no offerer is asked for them again for `idleMs`.
   */
  leaseAnswers(ids: readonly string[]): void {
    const now = this.clock.now();
    this.pruneLeaseAnswered(now);
    for (const id of ids) { this.leaseAnswered.delete(id); this.leaseAnswered.set(id, now); }
  }

  private pruneLeaseAnswered(now: number): void {
    for (const [id, at] of this.leaseAnswered) { if (now - at < this.idleMs) break; this.leaseAnswered.delete(id); }
  }

  private ask(w: WorkerEntry, id: string, now: number): void {
    this.asked.set(id, { w, at: now });
    let mine = this.askedOf.get(w);
    if (!mine) this.askedOf.set(w, mine = new Set());
    mine.add(id);
  }

  /** Forget that `id` was asked of a connection (its entry came, it is held now, or it is asked again). */
  private unask(id: string): void {
    const k = this.asked.get(id);
    if (!k) return;
    this.asked.delete(id);
    const mine = this.askedOf.get(k.w);
    mine?.delete(id);
    if (mine && !mine.size) this.askedOf.delete(k.w);
  }

  /** A frame of `w`'s handback arrived with these entry ids: if it brings a held one, the idle bound restarts. */
  touch(w: WorkerEntry, ids: readonly string[]): void {
    const a = this.byWorker.get(w);
    if (!a || !ids.some((id) => a.ids.has(id))) return;
    a.progress = this.clock.now();
    this.arm(w, a);
  }

  /** Let `w`'s held tasks go: those in `ids` (its handback brought them), or all of them. */
  release(w: WorkerEntry, ids?: readonly string[]): void {
    for (const id of ids ?? [...this.askedOf.get(w) ?? []]) if (this.asked.get(id)?.w === w) this.unask(id);
    const a = this.byWorker.get(w);
    if (!a) return;
    let ready = false;
    for (const id of ids ?? [...a.ids]) {
      if (!a.ids.delete(id)) continue;
      this.owner.delete(id);
      if (this.store().handbackEnded(id)) ready = true;
    }
    if (!a.ids.size) { this.clock.clearTimeout(a.timer); this.byWorker.delete(w); }
    if (ready) this.onReady();
  }

  stop(): void {
    for (const a of this.byWorker.values()) this.clock.clearTimeout(a.timer);
    this.byWorker.clear();
    this.owner.clear();
    this.asked.clear();
    this.askedOf.clear();
    this.leaseAnswered.clear();
  }

  private due(a: Window): number { return Math.min(a.progress + this.idleMs, a.since + this.maxMs); }

  private arm(w: WorkerEntry, a: Window): void {
    this.clock.clearTimeout(a.timer);
    a.timer = this.clock.setTimeout(() => this.expire(w, a), Math.max(0, this.due(a) - this.clock.now()));
  }

  private expire(w: WorkerEntry, a: Window): void {
    if (this.byWorker.get(w) !== a) return;
    const now = this.clock.now();
    if (now < this.due(a)) { this.arm(w, a); return; }
    const bound = now >= a.since + this.maxMs ? `the fixed bound of ${this.maxMs} ms` : `${this.idleMs} ms without a held entry`;
    this.log.warn({ worker: w.id, tasks: a.ids.size, heldMs: now - a.since }, `handback hold ended after ${bound}: the tasks it offered are dispatched again`);
    this.expired += a.ids.size;
    this.release(w);
  }
}
