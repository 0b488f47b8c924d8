import type { TaskRecord } from './task.js';

/** JSON with object keys in order: two specs that differ only in key order are the same task. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** Equal as JSON: strings and numbers compared as they are (no copy of a long prompt), objects in key order. */
function same(x: unknown, y: unknown): boolean {
  if (x === y) return true;
  if (!x || !y || typeof x !== 'object' || typeof y !== 'object') return false;
  // Native first (the same key order, as a resend has); key order aside only when that differs.
  return JSON.stringify(x) === JSON.stringify(y) || canonical(x) === canonical(y);
}

/**
 * The fields in which a task submitted again under a known id differs from the task that id names
 * (undefined: none, or the earlier task's fields cannot be read back). The id is an idempotency key,
 * so such a task is not run: the earlier one's result stands for it. A retry sends the same fields;
 * different ones are a mistake (two files numbered job-1…, a prompt edited and re-run), which the
 * submitter was never told of: it got the earlier prompt's answer as this one's.
 */
export function conflictingFields(given: unknown, rec: TaskRecord): string[] | undefined {
  // An archived task whose line cannot be read back (pruned, damaged, a memory-only store) has no fields to compare.
  if (rec.submittedAt === 0 || !given || typeof given !== 'object') return undefined;
  const a = given as Record<string, unknown>;
  const b = rec.spec as Record<string, unknown>;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete('id');
  const differ = [...keys].filter((k) => !same(a[k], b[k])).sort();
  return differ.length ? differ : undefined;
}
