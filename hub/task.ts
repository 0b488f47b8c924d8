import { z } from 'zod';
import type { ErrorCode, Receipt } from '../protocol/index.js';
import { isFinalState, type TaskState } from '../sched/index.js';
import { MAX_ATTEMPTS } from '../protocol/bounds.js';

const id = z.string().min(1).max(128).regex(/^[^\s/]+$/, 'no spaces or slashes');

/**
 * A task as submitted (CLI, control API, a topology runner). Strict: a misspelt field is an error,
 * not a silently ignored setting. `id` is an idempotency key.
 */
export const TaskSpecSchema = z.object({
  id: id.optional(),
  prompt: z.string().max(16 * 1024 * 1024),
  role: z.string().max(256).optional(),
  /** Capabilities a worker must have to run it. */
  caps: z.array(z.string().max(256)).max(64).optional(),
  /** Higher runs first; ties run in submission order. */
  priority: z.number().int().min(-1_000_000).max(1_000_000).default(0),
  max_tokens: z.number().int().positive().max(1_000_000).optional(),
  stop: z.array(z.string().max(256)).max(16).optional(),
  temperature: z.number().min(0).max(10).optional(),
  seed: z.number().int().optional(),
  grammar: z.string().max(1024 * 1024).optional(),
  json_schema: z.record(z.string(), z.unknown()).optional(),
  timeout_ms: z.number().int().positive().optional(),
  max_attempts: z.number().int().min(1).max(MAX_ATTEMPTS).optional(),
  /** Free-form labels (a run id, a node id); carried, never interpreted by the hub. */
  meta: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
}).strict();
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
