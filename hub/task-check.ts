import { z } from 'zod';
import { FAIL, compile, type JsonSchema } from '../protocol/json-schema.js';
import { TaskSpecSchema, type TaskSpec } from './task.js';

/**
 * TaskSpecSchema as the protocol's compiled checker (protocol/json-schema.ts): a batch of 5,000
 * tasks is the hub's largest piece of work on the way in, and zod took most of it. Zod stays the
 * definition and writes the error a refused task gets; test/hub/task-check.test.ts holds the two to
 * the same answers.
 */
const check = compile(z.toJSONSchema(TaskSpecSchema) as JsonSchema);

/** The parsed spec (defaults filled), or undefined when it is not a valid task. */
export function fastTaskSpec(input: unknown): TaskSpec | undefined {
  const out = check(input, []);
  return out === FAIL ? undefined : out as TaskSpec;
}
