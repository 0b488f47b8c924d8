import type { z } from 'zod';
import type { TaskSpecSchema } from './task-schema.js';
import type { ErrorCode, Receipt } from '../protocol/index.js';
import { isFinalState, type TaskState } from '../sched/index.js';

export type TaskSpec = z.output<typeof TaskSpecSchema>;
export type TaskInput = z.input<typeof TaskSpecSchema>;

export { TaskState } from '../sched/index.js';

/** A recorded result: written once per task id. */
export interface TaskResult {
  text: string;
  receipt?: Receipt;
  worker: string;
  attempt: number;
}

/** The hub's view of one task. */
export interface TaskRecord {
  id: string;
  spec: TaskSpec & { id: string };
  state: TaskState;
  /** Leases handed out so far. */
  attempts: number;
  /** Worker holding the lease (or that last held it). */
  worker?: string;
  leaseUntil?: number;
  /** Not to be leased before this time (retry backoff), epoch ms. */
  readyAt?: number;
  result?: TaskResult;
  error?: { code: ErrorCode; msg: string };
  submittedAt: number;
  finishedAt?: number;
  /** Submission order, for FIFO within a priority. */
  seq: number;
  /** Workers whose lease of it was lost while the hub stalled: each may still hand its result in. */
  stallLost?: string[];
}

/** True once a task will not change again. */
export function isFinal(r: TaskRecord): boolean {
  return isFinalState(r.state);
}
