import type { AnyMessage } from './schemas.js';
import { ENVELOPE, PAYLOAD_CHECKS } from '#gen/protocol-validators.js';
import { describe } from './check.js';
import { PROTOCOL_VERSION, Type } from './types.js';
import type { ErrorCode } from './errors.js';

/** Outcome of validating one decoded frame: a message, or an error code and what to reply to. */
export type Validated =
  | { ok: true; msg: AnyMessage }
  | { ok: false; code: ErrorCode; msg: string; re?: string };

const known = new Set<string>(Object.values(Type));

/**
 * Validate a decoded JSON value as a protocol message, in place: defaults are filled in and unknown
 * keys dropped on the value itself (a freshly decoded frame nobody else holds), by the checks
 * protocol/gen-validators.ts compiled from the zod schemas. Never throws.
 */
export function validate(value: unknown): Validated {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, code: 'SWARM_ERR_BAD_ENVELOPE', msg: 'a message must be a JSON object' };
  }
  const raw = value as Record<string, unknown>;
  const re = typeof raw.id === 'string' && raw.id.length <= 128 ? raw.id : undefined;
  if (raw.ver !== PROTOCOL_VERSION) {
    return { ok: false, code: 'SWARM_ERR_BAD_VERSION', msg: `unsupported ver ${JSON.stringify(raw.ver)?.slice(0, 32)}; this peer speaks ${PROTOCOL_VERSION}`, re };
  }
  if (!ENVELOPE(raw)) {
    return { ok: false, code: 'SWARM_ERR_BAD_ENVELOPE', msg: describe(ENVELOPE.errors), re };
  }
  const env = raw as Omit<AnyMessage, 'payload'> & { payload: unknown };
  const type = env.type;
  if (!known.has(type)) {
    return { ok: false, code: 'SWARM_ERR_UNKNOWN_TYPE', msg: `unknown type ${JSON.stringify(type.slice(0, 64))}`, re };
  }
  // `null`, a number or a list is not a payload (an absent one is read as `{}`).
  if (env.payload === undefined) env.payload = {};
  else if (typeof env.payload !== 'object' || env.payload === null || Array.isArray(env.payload)) {
    return { ok: false, code: 'SWARM_ERR_BAD_PAYLOAD', msg: `${type}: payload must be a JSON object`, re };
  }
  // The spec's ERROR is `{code: 500, msg}`: a numeric code is that HTTP-like status of a task failure.
  if (type === Type.ERROR && typeof (env.payload as { code?: unknown }).code === 'number') {
    const p = env.payload as { code: number; msg?: unknown };
    env.payload = { ...p, code: 'SWARM_ERR_TASK_FAILED', status: p.code, msg: typeof p.msg === 'string' ? p.msg : `error ${p.code}` };
  }
  const check = PAYLOAD_CHECKS[type as Type];
  if (!check(env.payload)) {
    return { ok: false, code: 'SWARM_ERR_BAD_PAYLOAD', msg: `${type}: ${describe(check.errors)}`, re };
  }
  return { ok: true, msg: env as AnyMessage };
}
