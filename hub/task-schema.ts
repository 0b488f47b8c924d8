import { z } from 'zod';
import { MAX_ATTEMPTS } from '../protocol/bounds.js';

// Read by the build (protocol/gen-validators.ts compiles it to gen/task-check.js) and by the types
// of hub/task.ts: the hub checks tasks with the generated code and never loads zod.
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
