import type { AnyMessage } from './schemas.js';
import { ENVELOPE_SCHEMA, PAYLOAD_SCHEMAS } from './schemas.gen.js';
import { FAIL, compile, type Check, type Issue } from './json-schema.js';
import { PROTOCOL_VERSION, Type } from './types.js';
import type { ErrorCode } from './errors.js';

/** Outcome of validating one decoded frame: a message, or an error code and what to reply to. */
export type Validated =
  | { ok: true; msg: AnyMessage }
  | { ok: false; code: ErrorCode; msg: string; re?: string };

// The zod schemas of schemas.ts, as generated JSON Schema: checking frames needs no zod (json-schema.ts says why).
// Each type's checker is compiled when a frame of that type first arrives: a worker sees few types.
const envelope = compile(ENVELOPE_SCHEMA);
const payloads = new Map<string, Check>();
const known = new Set<string>(Object.values(Type));
function payloadCheck(type: string): Check | undefined {
  let c = payloads.get(type);
  if (!c && known.has(type)) payloads.set(type, (c = compile(PAYLOAD_SCHEMAS[type as Type])));
  return c;
}

/** Validate a decoded JSON value as a protocol message. Never throws. */
export function validate(value: unknown): Validated {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, code: 'SWARM_ERR_BAD_ENVELOPE', msg: 'a message must be a JSON object' };
  }
  const raw = value as Record<string, unknown>;
  const re = typeof raw.id === 'string' && raw.id.length <= 128 ? raw.id : undefined;
  if (raw.ver !== PROTOCOL_VERSION) {
    return { ok: false, code: 'SWARM_ERR_BAD_VERSION', msg: `unsupported ver ${JSON.stringify(raw.ver)?.slice(0, 32)}; this peer speaks ${PROTOCOL_VERSION}`, re };
  }
  const issues: Issue[] = [];
  const env = envelope(raw, issues) as Omit<AnyMessage, 'payload'> & { payload: unknown } | typeof FAIL;
  if (env === FAIL) {
    return { ok: false, code: 'SWARM_ERR_BAD_ENVELOPE', msg: summarize(issues), re };
  }
  const type = env.type;
  const schema = payloadCheck(type);
  if (!schema) {
    return { ok: false, code: 'SWARM_ERR_UNKNOWN_TYPE', msg: `unknown type ${JSON.stringify(type.slice(0, 64))}`, re };
  }
  // `null`, a number or a list is not a payload (an absent one is read as `{}`).
  if (env.payload !== undefined && (typeof env.payload !== 'object' || env.payload === null || Array.isArray(env.payload))) {
    return { ok: false, code: 'SWARM_ERR_BAD_PAYLOAD', msg: `${type}: payload must be a JSON object`, re };
  }
  // The spec's ERROR is `{code: 500, msg}`: a numeric code is that HTTP-like status of a task failure.
  if (type === Type.ERROR && typeof (env.payload as { code?: unknown } | undefined)?.code === 'number') {
    const p = env.payload as { code: number; msg?: unknown };
    env.payload = { ...p, code: 'SWARM_ERR_TASK_FAILED', status: p.code, msg: typeof p.msg === 'string' ? p.msg : `error ${p.code}` };
  }
  const payload = schema(env.payload ?? {}, issues);
  if (payload === FAIL) {
    return { ok: false, code: 'SWARM_ERR_BAD_PAYLOAD', msg: `${type}: ${summarize(issues)}`, re };
  }
  env.payload = payload;
  return { ok: true, msg: env as AnyMessage };
}

function summarize(issues: readonly Issue[]): string {
  return issues
    .slice(0, 3)
    .map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');
}
