import type { WorkerEntry } from './worker-entry.js';

export { WorkerEntry, type Lease } from './worker-entry.js';

/** The hub's registry of connected workers. */
export class Registry {
  private readonly workers = new Map<string, WorkerEntry>();
  private readonly listeners = new Set<(id: string, joined: boolean) => void>();

  add(w: WorkerEntry): void { this.workers.set(w.id, w); this.emit(w.id, true); }
  get(id: string): WorkerEntry | undefined { return this.workers.get(id); }
  remove(id: string): void { if (this.workers.delete(id)) this.emit(id, false); }

  /**
   * Joins and leaves as they happen (the dashboard: a worker that dies and is respawned within a
   * second would otherwise never be seen dead). Returns the unsubscribe.
   */
  subscribe(fn: (id: string, joined: boolean) => void): () => void {
    this.listeners.add(fn);
    return () => { this.listeners.delete(fn); };
  }

  private emit(id: string, joined: boolean): void { for (const fn of this.listeners) fn(id, joined); }
  all(): IterableIterator<WorkerEntry> { return this.workers.values(); }
  get size(): number { return this.workers.size; }

  /** Public view of one worker, for status output. */
  static view(w: WorkerEntry): Record<string, unknown> {
    return {
      id: w.id, state: w.state, status: w.status, role: w.role, role_pending: w.pendingRole?.role, driver: w.driver, caps: w.caps,
      slots: w.slots, inflight: w.inflight.size, last_seen: w.lastSeen, load: w.load, pid: w.pid, done: w.done,
      engine: w.engine, engine_error: w.engineError, engine_fallback: w.engineFallback, failover_error: w.failoverError,
      // The address the worker's link comes from: which host it runs on, in a swarm across machines.
      addr: w.conn.socket?.remoteAddress,
    };
  }
}
