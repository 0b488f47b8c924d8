import type { Connection } from '../protocol/index.js';
import type { Answer } from './answer.js';
import type { PendingRole } from './roles.js';

/** Worker state as in the spec, section 6.1, plus slots and in-flight tasks. */
export interface WorkerEntry {
  id: string;
  role: string;
  status: 'idle' | 'busy' | 'dead';
  state: string;
  lastSeen: number;
  connectedAt: number;
  driver: string;
  caps: string[];
  slots: number;
  /** Leased tasks: when, the TASK_REQ id (replies name it in `re`), and the answer streamed so far. */
  inflight: Map<string, { leasedAt: number; reqId: string; answer: Answer }>;
  conn: Connection;
  pid?: number;
  load: number;
  /** When a slot last became free (for dispatch latency). */
  freedAt: number;
  done: number;
  /** Secret given in HANDSHAKE_ACK: a reconnect that presents it replaces this connection at once. */
  session: string;
  /** ASSIGN_ROLE sent, no ACK yet: dispatch still uses `role`. */
  pendingRole?: PendingRole;
  /** The role plan gave `role` (so it may move it); false for a worker's own or an operator's choice. */
  roleFromPlan?: boolean;
  /** The worker answered ASSIGN_ROLE with ok:false: the plan leaves it alone. */
  roleRefused?: boolean;
}

/** The hub's registry of connected workers. */
export class Registry {
  private readonly workers = new Map<string, WorkerEntry>();

  add(w: WorkerEntry): void { this.workers.set(w.id, w); }
  get(id: string): WorkerEntry | undefined { return this.workers.get(id); }
  remove(id: string): void { this.workers.delete(id); }
  all(): IterableIterator<WorkerEntry> { return this.workers.values(); }
  get size(): number { return this.workers.size; }

  /** Public view of one worker, for status output. */
  static view(w: WorkerEntry): Record<string, unknown> {
    return {
      id: w.id, state: w.state, status: w.status, role: w.role, role_pending: w.pendingRole?.role, driver: w.driver, caps: w.caps,
      slots: w.slots, inflight: w.inflight.size, last_seen: w.lastSeen, load: w.load, pid: w.pid, done: w.done,
      // The address the worker's link comes from: which host it runs on, in a swarm across machines.
      addr: w.conn.socket?.remoteAddress,
    };
  }
}
