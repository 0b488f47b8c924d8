import { Type } from '../protocol/index.js';
import { pickByPrefix, promptKey, type PromptKey } from '../sched/index.js';
import type { DispatchDeps } from './context.js';
import type { WorkerEntry } from './registry.js';
import type { StoreEvent } from './store-events.js';
import type { TaskRecord } from './task.js';

/**
 * Leases ready tasks to workers with free slots: which task is sched's rule (the store's queue);
 * which of several equal free workers whose engines keep their last prompt (the prompt-cache cap)
 * gets it is cache affinity (the longest shared prompt start), chosen before the one lease.
 * Runs once per event-loop turn however many events asked for it. It wakes itself from the store's
 * events (a task accepted, requeued or ready again) and from the workers' (a slot freed, a socket
 * drained), so no caller has to remember to.
 */
export class Dispatcher {
  /** Workers that may have a free slot. */
  private readonly free = new Set<WorkerEntry>();
  /** When each newly accepted task became ready to run (performance.now), for dispatch latency. */
  private readonly readyAt = new Map<string, number>();
  /** Each prompt-keeping worker's last prompt (its start, keyed), for cache-aware dispatch (sched/affinity.ts). */
  private readonly lastPrompt = new Map<string, PromptKey>();
  /** The key affine() computed for the task it picked a worker for (send() keeps it as that worker's last prompt). */
  private keyed?: { id: string; key: PromptKey };
  private scheduled = false;
  /** Links this pass put TASK_REQs on: flushed at its end (see dispatch). */
  private readonly sentTo = new Set<WorkerEntry>();
  private readyTimer?: NodeJS.Timeout;
  /** Wakes a pass when a busy worker may take its next task ahead (WorkerEntry.aheadAt). */
  private aheadTimer?: NodeJS.Timeout;
  private aheadTimerAt?: number;
  /** When the ready timer fires (epoch ms), if armed. */
  private readyTimerAt?: number;

  constructor(private readonly hub: DispatchDeps) {}

  /** The store's events: what became runnable wakes a pass; dispatch latency is measured from acceptance. */
  readonly onStoreEvent = (e: StoreEvent): void => {
    if (e.type === 'accepted') { this.readyAt.set(e.rec.id, performance.now()); this.schedule(); }
    // Finished without this hub dispatching it (a handback brought its result): nothing to time.
    else if (e.type === 'done' || e.type === 'failed') this.readyAt.delete(e.rec.id);
    else if (e.type === 'requeued' || e.type === 'ready') {
      // A retry that backs off becomes runnable later than now: the timer wakes the pass then.
      if (e.rec.readyAt !== undefined && e.rec.readyAt > Date.now()) this.armReadyTimer(); else this.schedule();
    }
  };

  /** A task left the queue without being dispatched (cancelled). */
  forgetTask(id: string): void { this.readyAt.delete(id); }

  /** A worker may take work (joined, a slot freed, its socket drained). */
  offer(w: WorkerEntry): void { if (w.inflight.size < w.capacity) this.free.add(w); this.schedule(); }
  /** A worker takes no work for now (its engine cools down). */
  withdraw(w: WorkerEntry): void { this.free.delete(w); }
  /** A worker left the hub. */
  left(w: WorkerEntry): void { this.free.delete(w); this.lastPrompt.delete(w.id); }

  schedule(): void {
    if (this.scheduled || this.hub.isStopping) return;
    this.scheduled = true;
    setImmediate(() => this.dispatch());
  }

  /** Wake the dispatcher when the earliest backed-off task becomes ready. */
  armReadyTimer(): void {
    const at = this.hub.store.queue.nextReadyAt();
    if (at === undefined || this.hub.isStopping) return;
    // Already armed for this time or sooner (a burst of retries re-arms it once).
    if (this.readyTimer && this.readyTimerAt !== undefined && this.readyTimerAt <= at && this.readyTimerAt >= Date.now()) return;
    if (this.readyTimer) clearTimeout(this.readyTimer);
    this.readyTimerAt = at;
    this.readyTimer = setTimeout(() => { this.readyTimer = undefined; this.readyTimerAt = undefined; this.schedule(); }, Math.max(0, at - Date.now()) + 1);
  }

  stop(): void { if (this.readyTimer) clearTimeout(this.readyTimer); if (this.aheadTimer) clearTimeout(this.aheadTimer); }

  /**
   * With lease-ahead on and tasks still queued after a pass: wake when the first busy worker's running
   * task nears its expected end, and offer it then (its capacity grows by one, see WorkerEntry.capacity),
   * so it starts its next task in the turn its last one ends instead of after a round trip to the hub.
   * A worker that cannot start it within its hold gives it back (SLOTS_FULL, no attempt used).
   */
  private armAhead(): void {
    if (this.hub.config.leaseAheadMs <= 0 || this.hub.isStopping || this.hub.store.queue.counts().queued === 0) return;
    // A worker already due was offered (it stays among the free ones until it takes a task or cannot).
    const now = performance.now();
    let at = Infinity;
    for (const w of this.hub.registry.all()) {
      const a = w.aheadAt();
      if (a !== undefined && a > now && a < at) at = a;
    }
    if (at === Infinity) return;
    if (this.aheadTimer && this.aheadTimerAt !== undefined && this.aheadTimerAt <= at) return;
    if (this.aheadTimer) clearTimeout(this.aheadTimer);
    this.aheadTimerAt = at;
    this.aheadTimer = setTimeout(() => {
      this.aheadTimer = undefined;
      this.aheadTimerAt = undefined;
      const now = performance.now();
      for (const w of this.hub.registry.all()) {
        const a = w.aheadAt();
        if (a !== undefined && a <= now) this.offer(w);
      }
      this.schedule();
    }, Math.max(1, Math.ceil(at - now)));
  }

  /**
   * Dispatch now, and put the TASK_REQs on the wire at once: for a batch just accepted, whose
   * replication and answer to the submitter (the encoding of thousands of entries) would otherwise
   * go first, with the workers idle meanwhile.
   */
  dispatchNow(): void {
    if (this.hub.isStopping) return;
    this.dispatch();
    // A link with nothing queued writes nothing.
    for (const w of this.hub.registry.all()) w.conn.flush();
  }

  private dispatch(): void {
    this.scheduled = false;
    // Free slots first, then queue places (short tasks only, see WorkerEntry.capacity): a task waits
    // in one worker's queue only when no worker has a slot free for it.
    this.fill((w) => w.inflight.size < w.slots);
    this.fill(() => true);
    // On the wire now, not at the link's own flush: that is a setImmediate queued from this pass (itself
    // a setImmediate), so it would wait a whole turn of the loop, behind whatever I/O that turn brings
    // (other workers' results, HTTP), while the worker that just freed a slot sits idle. The pass's
    // TASK_REQs to one link still go out in one write.
    for (const w of this.sentTo) w.conn.flush();
    this.sentTo.clear();
    this.armAhead();
  }

  private fill(eligible: (w: WorkerEntry) => boolean): void {
    const store = this.hub.store;
    // A worker that took a task and can take more goes behind the others (Set order: re-added
    // entries are visited again in this same loop), so tasks go round the workers.
    for (const w of this.free) {
      if (!w.canTake) { this.free.delete(w); continue; }
      if (!eligible(w)) continue;
      const to = w.keepsPrompts ? this.affine(w, eligible) : w;
      if (!to) continue;
      const rec = store.lease(to);
      if (!rec) continue;
      this.send(to, rec);
      this.free.delete(to);
      this.free.add(to);
    }
  }

  /**
   * For a prompt-keeping worker: the task it would get, and of the free prompt-keeping workers that
   * route alike (so would get the same task), the one whose last prompt shares the longest start with
   * it; `w` on a tie. Undefined when there is nothing for `w` to run.
   */
  private affine(w: WorkerEntry, eligible: (w: WorkerEntry) => boolean): WorkerEntry | undefined {
    let same: WorkerEntry[] | undefined;
    for (const o of this.free) {
      if (o !== w && o.keepsPrompts && o.canTake && eligible(o) && o.role === w.role && sameCaps(o.caps, w.caps)) (same ??= [w]).push(o);
    }
    if (!same) return w;
    const rec = this.hub.store.peek(w);
    if (!rec) return undefined;
    const key = promptKey(rec.spec.prompt);
    this.keyed = { id: rec.id, key };
    return same[pickByPrefix(key, same.map((o) => this.lastPrompt.get(o.id)))];
  }

  private send(w: WorkerEntry, rec: TaskRecord): void {
    const s = rec.spec;
    if (w.keepsPrompts) this.lastPrompt.set(w.id, this.keyed?.id === rec.id ? this.keyed.key : promptKey(s.prompt));
    this.keyed = undefined;
    const now = performance.now();
    const reqId = w.conn.send(Type.TASK_REQ, {
      task_id: rec.id, prompt: s.prompt, stop: s.stop ?? [], attempt: rec.attempts, role: s.role,
      max_tokens: s.max_tokens, temperature: s.temperature, seed: s.seed, grammar: s.grammar,
      json_schema: s.json_schema, timeout_ms: s.timeout_ms,
      // Partial answers cost the worker and the hub a wake-up each; only a dashboard shows them.
      ...(this.hub.watchers > 0 ? {} : { stream: false }),
    });
    // A lease into a queue place waited for no slot to free: from when the worker was due one ahead
    // (its word that a task ends, or its mean run time), else (prefetch) from its last free slot.
    const queued = w.inflight.size >= w.slots;
    const since = queued ? w.aheadAt() ?? w.freedAt : w.freedAt;
    if (queued) this.hub.metrics.leasedQueued++;
    w.leased(rec.id, reqId, now);
    this.sentTo.add(w);
    const readyAt = this.readyAt.get(rec.id) ?? 0;
    this.readyAt.delete(rec.id);
    this.hub.metrics.dispatched(now - Math.max(since, readyAt));
  }
}

function sameCaps(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((c) => b.includes(c));
}
