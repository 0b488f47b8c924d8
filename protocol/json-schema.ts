/**
 * A checker for the subset of JSON Schema that `z.toJSONSchema()` emits for the protocol's zod
 * schemas (protocol/schemas.ts, generated into schemas.gen.ts). Why not zod itself: zod costs a
 * worker process ~80 ms of CPU and ~10 MB of RSS to load, times 25 workers starting at once on
 * two cores; this file costs next to nothing. It parses the way zod does: unknown keys of a plain
 * object are dropped, of a passthrough object kept, defaults filled in, and numbers must be finite.
 * A keyword it does not know makes compile() throw, so a schema it cannot honour is never half-checked.
 */

/** A JSON Schema node as z.toJSONSchema() writes it (the keywords compile() understands). */
export interface JsonSchema {
  $schema?: string;
  /** One type, or a list of scalar types of which the value must be one. */
  type?: 'object' | 'array' | 'string' | 'number' | 'integer' | 'boolean' | readonly ('string' | 'number' | 'integer' | 'boolean')[];
  /** A regular expression (JavaScript's dialect, as zod's `.regex()` writes it) a string must match. */
  pattern?: string;
  const?: unknown;
  enum?: readonly unknown[];
  default?: unknown;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  items?: JsonSchema;
  properties?: Readonly<Record<string, JsonSchema>>;
  required?: readonly string[];
  additionalProperties?: JsonSchema | boolean;
  propertyNames?: JsonSchema;
  description?: string;
}

/** One problem found, zod-style: where, and what. */
export interface Issue { path: (string | number)[]; message: string }

/** Returns the parsed value (defaults filled, unknown keys dropped), or FAIL after pushing issues. */
export type Check = (value: unknown, issues: Issue[]) => unknown;

/** What a Check returns for a value that failed. */
export const FAIL: unique symbol = Symbol('fail');

const KNOWN = new Set(['$schema', 'type', 'const', 'enum', 'default', 'minLength', 'maxLength', 'minimum', 'maximum',
  'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems', 'items', 'properties', 'required', 'additionalProperties',
  'propertyNames', 'description', 'pattern']);

/** Compile a schema into a Check; throws on a keyword or type this checker does not implement. */
export function compile(s: JsonSchema): Check {
  for (const k of Object.keys(s)) if (!KNOWN.has(k)) throw new Error(`json-schema: unsupported keyword ${k}`);
  const base = compileType(s);
  const hasConst = 'const' in s;
  const allowed = s.enum ? new Set(s.enum) : undefined;
  if (!hasConst && !allowed) return base;
  return (v, issues) => {
    const out = base(v, issues);
    if (out === FAIL) return FAIL;
    if (hasConst && out !== s.const) return fail(issues, `expected ${JSON.stringify(s.const)}`);
    if (allowed && !allowed.has(out)) return fail(issues, `expected one of ${[...allowed].map((x) => JSON.stringify(x)).join('|')}`);
    return out;
  };
}

function compileType(s: JsonSchema): Check {
  if (Array.isArray(s.type)) {
    const alts = (s.type as readonly string[]).map((type) => {
      if (type !== 'string' && type !== 'number' && type !== 'integer' && type !== 'boolean') throw new Error(`json-schema: a list of types may hold scalar types only, not ${type}`);
      return compileType({ ...s, type });
    });
    // Scalars come out as they went in, so the first alternative that takes the value is the answer.
    return (v, issues) => {
      for (const alt of alts) if (alt(v, []) !== FAIL) return v;
      return fail(issues, expected((s.type as readonly string[]).join(' | '), v));
    };
  }
  switch (s.type) {
    case undefined:
      if (s.properties || s.items) throw new Error('json-schema: properties or items without a type');
      return (v) => v;
    case 'string': return stringCheck(s);
    case 'number': case 'integer': return numberCheck(s, s.type === 'integer');
    case 'boolean': return (v, issues) => (typeof v === 'boolean' ? v : fail(issues, expected('boolean', v)));
    case 'array': return arrayCheck(s);
    case 'object': return objectCheck(s);
    default: throw new Error(`json-schema: unsupported type ${String(s.type)}`);
  }
}

function stringCheck(s: JsonSchema): Check {
  const min = s.minLength ?? 0;
  const max = s.maxLength ?? Infinity;
  const pattern = s.pattern !== undefined ? new RegExp(s.pattern) : undefined;
  return (v, issues) => {
    if (typeof v !== 'string') return fail(issues, expected('string', v));
    if (v.length < min) return fail(issues, `too small: expected at least ${min} characters`);
    if (v.length > max) return fail(issues, `too big: expected at most ${max} characters`);
    if (pattern && !pattern.test(v)) return fail(issues, `invalid string: must match ${s.pattern}`);
    return v;
  };
}

function numberCheck(s: JsonSchema, integer: boolean): Check {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = s;
  return (v, issues) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) return fail(issues, expected(integer ? 'integer' : 'number', v));
    if (integer && !Number.isInteger(v)) return fail(issues, 'expected integer, received a fraction');
    if (minimum !== undefined && v < minimum) return fail(issues, `too small: expected >= ${minimum}`);
    if (maximum !== undefined && v > maximum) return fail(issues, `too big: expected <= ${maximum}`);
    if (exclusiveMinimum !== undefined && v <= exclusiveMinimum) return fail(issues, `too small: expected > ${exclusiveMinimum}`);
    if (exclusiveMaximum !== undefined && v >= exclusiveMaximum) return fail(issues, `too big: expected < ${exclusiveMaximum}`);
    return v;
  };
}

function arrayCheck(s: JsonSchema): Check {
  const item = s.items ? compile(s.items) : (v: unknown) => v;
  const min = s.minItems ?? 0;
  const max = s.maxItems ?? Infinity;
  return (v, issues) => {
    if (!Array.isArray(v)) return fail(issues, expected('array', v));
    if (v.length < min) return fail(issues, `too small: expected at least ${min} items`);
    if (v.length > max) return fail(issues, `too big: expected at most ${max} items`);
    // Copied only once an item comes out different (a default filled in, a key dropped): a frame that
    // is already in shape is returned as it came, with nothing allocated for it.
    let out: unknown[] | undefined;
    let ok = true;
    for (let i = 0; i < v.length; i++) {
      const n = issues.length;
      const x: unknown = v[i];
      const r = item(x, issues);
      if (r === FAIL) { ok = false; under(issues, n, i); } else if (out) out[i] = r; else if (!Object.is(r, x)) { out = v.slice(0, i); out[i] = r; }
    }
    if (!ok) return FAIL;
    return out ?? v;
  };
}

interface Prop { key: string; check: Check; required: boolean; hasDefault: boolean; def: unknown }

function objectCheck(s: JsonSchema): Check {
  const required = new Set(s.required ?? []);
  const props: Prop[] = Object.entries(s.properties ?? {}).map(([key, p]) => ({
    key, check: compile(p), required: required.has(key), hasDefault: 'default' in p, def: p.default,
  }));
  const known = new Set(props.map((p) => p.key));
  if (s.propertyNames && s.propertyNames.type !== 'string') throw new Error('json-schema: propertyNames other than strings');
  const extra = s.additionalProperties;
  // Unknown keys: dropped (zod's default), refused (strict), kept as they are ({} or true: passthrough), or checked (a record).
  const rest = extra === undefined ? undefined : extra === false ? 'refuse' : extra === true || Object.keys(extra).length === 0 ? 'keep' : compile(extra);
  // The input object itself is the result when nothing in it changes (no default to fill, no key to
  // drop, no nested value replaced): the usual frame costs a walk, not a copy. The copy, once needed,
  // holds what the walk has passed so far; its key order may differ from the input's, which no reader
  // of a parsed frame depends on.
  return (v, issues) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(issues, expected('object', v));
    const input = v as Record<string, unknown>;
    let out: Record<string, unknown> | undefined;
    let ok = true;
    let present = 0;
    for (let i = 0; i < props.length; i++) {
      const p = props[i]!;
      const has = Object.hasOwn(input, p.key);
      if (has) present++;
      const x = has ? input[p.key] : undefined;
      if (x === undefined) {
        if (p.hasDefault) { out ??= copyUpTo(input, props, i); out[p.key] = copy(p.def); }
        else if (p.required) { issues.push({ path: [p.key], message: 'required' }); ok = false; }
        else if (has && out) out[p.key] = undefined; // as zod: a key given as undefined (msgpack can) stays
        continue;
      }
      const n = issues.length;
      const r = p.check(x, issues);
      if (r === FAIL) { ok = false; under(issues, n, p.key); } else if (out) out[p.key] = r; else if (!Object.is(r, x)) { out = copyUpTo(input, props, i); out[p.key] = r; }
    }
    if (rest === undefined) {
      // Unknown keys are dropped: there are some exactly when the input has more keys than it has known ones.
      if (ok && !out && Object.keys(input).length > present) out = copyUpTo(input, props, props.length);
    } else {
      // `__proto__` is dropped, as zod drops it: copied, it would set the result's prototype.
      if (ok && !out && Object.hasOwn(input, '__proto__')) out = copyUpTo(input, props, props.length);
      for (const key of Object.keys(input)) {
        if (known.has(key)) continue;
        if (rest === 'refuse') { issues.push({ path: [], message: `unrecognized key: ${JSON.stringify(key)}` }); ok = false; continue; }
        if (key === '__proto__') continue;
        if (rest === 'keep') { if (out) out[key] = input[key]; continue; }
        const x = input[key];
        const n = issues.length;
        const r = rest(x, issues);
        if (r === FAIL) { ok = false; under(issues, n, key); } else if (out) out[key] = r; else if (!Object.is(r, x)) { out = copyUpTo(input, props, props.length); copyExtras(input, out, known, key); out[key] = r; }
      }
    }
    if (!ok) return FAIL;
    return out ?? input;
  };
}

/** The known keys of `input` among the first `end` properties, as they are. */
function copyUpTo(input: Record<string, unknown>, props: readonly Prop[], end: number): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (let j = 0; j < end; j++) { const k = props[j]!.key; if (Object.hasOwn(input, k)) o[k] = input[k]; }
  return o;
}

/** The unknown keys of `input` before `until`, into a copy made partway through them. */
function copyExtras(input: Record<string, unknown>, out: Record<string, unknown>, known: Set<string>, until: string): void {
  for (const key of Object.keys(input)) {
    if (key === until) return;
    if (!known.has(key) && key !== '__proto__') out[key] = input[key];
  }
}

/** Defaults are handed out as copies, so no parsed message shares (and mutates) another's array. */
function copy(v: unknown): unknown {
  return typeof v === 'object' && v !== null ? JSON.parse(JSON.stringify(v)) : v;
}

function fail(issues: Issue[], message: string): typeof FAIL {
  issues.push({ path: [], message });
  return FAIL;
}

/** Paths are built on the way out of a failure, so a value that passes pays nothing for them. */
function under(issues: Issue[], from: number, key: string | number): void {
  for (let i = from; i < issues.length; i++) issues[i]!.path.unshift(key);
}

function expected(what: string, v: unknown): string {
  const got = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' && !Number.isFinite(v) ? String(v) : typeof v;
  return `expected ${what}, received ${got}`;
}
