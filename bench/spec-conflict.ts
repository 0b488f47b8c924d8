// The cost of naming conflicts on a resend: POST /tasks compares each duplicate with the task its id
// names (hub/spec-conflict.ts). 5,000 duplicates of 150-character prompts with a `meta` object, the
// same fields (a retried upload), 20 passes a round. Prints ms per 5,000 duplicates; writes nothing.
import os from 'node:os';
import { conflictingFields } from '../hub/spec-conflict.js';
import type { TaskRecord } from '../hub/task.js';

const specs = Array.from({ length: 5000 }, (_, i) => ({ id: `bench-${i}`, prompt: `a prompt of some length for task ${i} `.repeat(4), max_tokens: 8, meta: { n: i, kind: 'bench' }, priority: 0 }));
const recs = specs.map((s) => ({ submittedAt: 1, spec: { ...s } }) as unknown as TaskRecord);
for (let round = 0; round < 5; round++) {
  const t0 = performance.now();
  let conflicts = 0;
  for (let k = 0; k < 20; k++) for (let i = 0; i < specs.length; i++) if (conflictingFields(specs[i], recs[i]!)) conflicts++;
  console.log(JSON.stringify({ round, ms_per_5000: +((performance.now() - t0) / 20).toFixed(2), conflicts, load: os.loadavg()[0]!.toFixed(2) }));
}
