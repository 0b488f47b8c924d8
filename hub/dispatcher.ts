import { Type } from '../protocol/index.js';
import { pickByPrefix } from '../sched/index.js';
import type { HubContext } from './context.js';
import type { WorkerEntry } from './registry.js';
import type { TaskRecord } from './task.js';

/**
 * Leases ready tasks to workers with free slots: which task is sched's rule (the store's queue);
 * which of several equal free workers gets it is cache affinity (the longest shared prompt start).
 * Runs once per event-loop turn however many events asked for it.
 */
export class Dispatcher {
  /** Workers that may have a free slot. */
  private readonly free = new Set<WorkerEntry>();
  /** When each newly accepted task became ready to run (performance.now), for dispatch latency. */
  private readonly readyAt = new Map<string, number>();
  /** Each worker's last prompt (its start), for cache-aware dispatch (sched/affinity.ts). */
  private readonly lastPrompt = new Map<string, string>();
  private scheduled = false;
  private readyTimer?: NodeJS.Timeout;

  constructor(private readonly hub: HubContext) {}

  /** Tasks accepted now (latency is measured from here). */
  accepted(ids: Iterable<string>, now = performance.now()): void { for (const id of ids) this.readyAt.set(id, now); }
  /** A task left the queue without being dispatched (cancelled). */
  forgetTask(id: string): void { this.readyAt.delete(id); }

  /** A worker may take work (joined, a slot freed, its socket drained). */
  offer(w: WorkerEntry): void { if (w.inflight.size < w.slots) this.free.add(w); this.schedule(); }
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
    if (this.readyTimer) clearTimeout(this.readyTimer);
    this.readyTimer = setTimeout(() => this.schedule(), Math.max(0, at - Date.now()) + 1);
  }

  stop(): void { if (this.readyTimer) clearTimeout(this.readyTimer); }

  private dispatch(): void {
    this.scheduled = false;
    const store = this.hub.store;
    let progress = true;
    while (progress && this.free.size > 0) {
      progress = false;
      for (const w of this.free) {
        if (!w.canTake) { this.free.delete(w); continue; }
        let rec = store.lease({ id: w.id, role: w.role || undefined, caps: w.caps });
        if (!rec) continue;
        // Cache-aware: an equal free worker whose last prompt starts like this one gets it instead.
        const to = this.affine(w, rec.spec.prompt);
        if (to !== w && store.unlease(rec.id, w.id)) rec = store.lease({ id: to.id, role: to.role || undefined, caps: to.caps });
        if (!rec) continue;
        this.send(to, rec);
        progress = true;
      }
    }
  }

  /** Of the free workers that could run what `w` was given, the one whose last prompt shares the longest start with `prompt`. */
  private affine(w: WorkerEntry, prompt: string): WorkerEntry {
    if (this.free.size < 2) return w;
    const same = [w];
    for (const o of this.free) {
      if (o !== w && o.role === w.role && o.canTake && o.caps.length === w.caps.length && o.caps.every((c) => w.caps.includes(c))) same.push(o);
    }
    return same.length < 2 ? w : same[pickByPrefix(prompt, same.map((o) => this.lastPrompt.get(o.id)))]!;
  }

  private send(w: WorkerEntry, rec: TaskRecord): void {
    const s = rec.spec;
    this.lastPrompt.set(w.id, s.prompt.length > 65_536 ? s.prompt.slice(0, 65_536) : s.prompt);
    const now = performance.now();
    const reqId = w.conn.send(Type.TASK_REQ, {
      task_id: rec.id, prompt: s.prompt, stop: s.stop ?? [], attempt: rec.attempts, role: s.role,
      max_tokens: s.max_tokens, temperature: s.temperature, seed: s.seed, grammar: s.grammar,
      json_schema: s.json_schema, timeout_ms: s.timeout_ms,
    });
    w.leased(rec.id, reqId, now);
    this.hub.failover.changed(rec);
    const readyAt = this.readyAt.get(rec.id) ?? 0;
    this.readyAt.delete(rec.id);
    this.hub.metrics.dispatched(now - Math.max(w.freedAt, readyAt));
  }
}
