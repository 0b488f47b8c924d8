import { SwarmError } from '../protocol/index.js';

/**
 * Room a TASK_REQ needs besides the task's own fields: the envelope (ver, id, type, src, dst up to
 * 128 characters each, re) and the fields the hub adds (task_id, attempt). Generous on purpose.
 */
export const ENVELOPE_RESERVE = 2048;
/** Deepest nesting a json_schema may have (msgpack frames allow 64 levels; schemas need far fewer). */
export const MAX_SCHEMA_DEPTH = 32;
/**
 * Deepest nesting any task may have (its json_schema's levels and the task's own): a body of 200,000
 * nested brackets overflowed the stack of the encoder below, answered as SWARM_ERR_INTERNAL.
 */
export const MAX_TASK_DEPTH = MAX_SCHEMA_DEPTH + 8;
/** Most nodes (objects, arrays, values) a json_schema may hold. */
export const MAX_SCHEMA_NODES = 20_000;

/**
 * Check, before anything is journaled, that every task can be sent to a worker: its fields must fit
 * in one protocol line (`maxLine` bytes, the envelope's reserve left over) as JSON encodes them,
 * and a json_schema must be bounded in depth and size. Walks iteratively: a 50,000-level schema is
 * refused here, not a stack overflow later. Throws SWARM_ERR_TOO_LARGE naming the task, the field
 * and the limit.
 */
export function checkTasksFit(specs: readonly unknown[], maxLine: number): void {
  const room = maxLine - ENVELOPE_RESERVE;
  specs.forEach((spec, i) => {
    if (!spec || typeof spec !== 'object') return; // the schema says what is wrong with it
    const s = spec as Record<string, unknown>;
    const name = typeof s.id === 'string' ? `task ${s.id.slice(0, 128)}` : `task #${i + 1}`;
    if (s.json_schema !== undefined) checkSchema(s.json_schema, name);
    // Most tasks are far below the bound: an upper bound from their strings' lengths says so without
    // encoding them (5,000 encodings were ~10 ms of an upload); else one encoding of the whole task
    // (UTF-8 is at most 3 bytes a UTF-16 unit; the margin covers what the per-field count below adds).
    if (flatBound(s) <= room) return;
    checkDepth(s, name);
    if (JSON.stringify(s).length * 3 + 4096 <= room) return;
    let total = 2;
    let largest = { field: '', bytes: 0 };
    for (const [field, value] of Object.entries(s)) {
      const bytes = Buffer.byteLength(JSON.stringify(value) ?? '') + Buffer.byteLength(field) + 4;
      total += bytes;
      if (bytes > largest.bytes) largest = { field, bytes };
    }
    if (total > room) {
      throw new SwarmError('SWARM_ERR_TOO_LARGE',
        `${name} is ${total} bytes as JSON (${largest.field}: ${largest.bytes}); a task must fit in one ${maxLine}-byte protocol line (--max-line) less ${ENVELOPE_RESERVE} bytes of envelope: at most ${room} bytes`);
    }
  });
}

/**
 * Most bytes a flat task can take as JSON: a string character escapes to at most 6 bytes (`\u001f`),
 * a key is written with quotes, colon and comma, a finite number in at most 25 characters. Infinity
 * for a field that is a list or an object: the caller encodes the task then.
 */
function flatBound(s: Record<string, unknown>): number {
  let n = 2;
  for (const k in s) {
    const v = s[k];
    n += k.length * 6 + 4;
    if (typeof v === 'string') n += v.length * 6 + 2;
    else if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) n += 25;
    else return Infinity;
  }
  return n;
}

/** A whole task's nesting (JSON.stringify recurses, and a body 200,000 deep overflowed its stack). */
const checkDepth = (task: object, name: string): void => checkNesting(task, name, MAX_TASK_DEPTH, Infinity);
const checkSchema = (schema: unknown, name: string): void => checkNesting(schema, `${name}: json_schema`, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES);

/** Depth and node count of a JSON value, walked iteratively so that no input can overflow the stack. */
function checkNesting(value: unknown, what: string, maxDepth: number, maxNodes: number): void {
  const stack: [unknown, number][] = [[value, 1]];
  let nodes = 0;
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (++nodes > maxNodes) throw new SwarmError('SWARM_ERR_TOO_LARGE', `${what} has more than ${maxNodes} nodes`);
    if (!v || typeof v !== 'object') continue;
    if (depth > maxDepth) throw new SwarmError('SWARM_ERR_TOO_LARGE', `${what} is nested deeper than ${maxDepth} levels`);
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
}
