import { Envelope, Payloads, type AnyMessage } from './schemas.js';
import { PROTOCOL_VERSION, Type } from './types.js';
import type { ErrorCode } from './errors.js';

/** Outcome of validating one decoded frame: a message, or an error code and what to reply to. */
export type Validated =
  | { ok: true; msg: AnyMessage }
  | { ok: false; code: ErrorCode; msg: string; re?: string };

const known = new Set<string>(Object.values(Type));

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
  const env = Envelope.safeParse(raw);
  if (!env.success) {
    return { ok: false, code: 'SWARM_ERR_BAD_ENVELOPE', msg: summarize(env.error.issues), re };
  }
  const type = env.data.type;
  if (!known.has(type)) {
    return { ok: false, code: 'SWARM_ERR_UNKNOWN_TYPE', msg: `unknown type ${JSON.stringify(type.slice(0, 64))}`, re };
  }
  const schema = Payloads[type as Type];
  const payload = schema.safeParse(env.data.payload ?? {});
  if (!payload.success) {
    return { ok: false, code: 'SWARM_ERR_BAD_PAYLOAD', msg: `${type}: ${summarize(payload.error.issues)}`, re };
  }
  const msg = { ...env.data, type, payload: payload.data } as AnyMessage;
  return { ok: true, msg };
}

function summarize(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues
    .slice(0, 3)
    .map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');
}
