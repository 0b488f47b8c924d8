import { createHmac } from 'node:crypto';
import { safeEqual, workerCredential } from './auth.js';

/**
 * Identity on replicated results and specs. In gossip mode results travel from member to member and
 * any survivor hands them back to a hub, so the hub cannot tell the producer from the link they came
 * on. Each result therefore carries a MAC made by its producer with that worker's credential
 * (protocol/auth.ts `workerCredential`): the hub, which holds the swarm token, derives the same key
 * from the worker id the result names, and a worker holding only its own credential can sign as
 * itself and as no one else. What the hub itself replicates it signs with a key of its own, so a hub
 * that lost its journal can still take back what an earlier hub of this swarm sent out.
 *
 *   result: `rw1.` HMAC-SHA256(workerCredential(token, worker), "swarm-result\n" id "\n" attempt "\n" text)
 *           `rh1.` the same under the hub key, with the worker id after the attempt
 *   failure: `fw1.` HMAC-SHA256(workerCredential(token, worker), "swarm-failure\n" id "\n" attempt "\n" code "\n" msg),
 *           by the member that decided it (an acting coordinator's verdict, or a member's final error)
 *           `fh1.` the same under the hub key, with the worker id after the attempt
 *   spec:   `sw1.<hex>.<worker>` HMAC-SHA256(workerCredential(token, worker), "swarm-spec\n" canonical JSON)
 *           `sh1.<hex>` the same under the hub key
 *           `sh2.<at>.<hex>` the same with the time the hub accepted the task ("swarm-spec-at\n" at "\n" JSON)
 * The hub key is HMAC-SHA256(token, "swarm-hub-origin"), hex.
 */

/** The key a worker signs with: its credential, derived from the swarm token if that is what it holds. */
export function workerKey(tokenOrCredential: string, workerId: string): string {
  return tokenOrCredential.startsWith('wc1.') ? tokenOrCredential : workerCredential(tokenOrCredential, workerId);
}

/** The key the hub signs what it replicates with. */
export function hubKey(token: string): string {
  return createHmac('sha256', token).update('swarm-hub-origin').digest('hex');
}

function hmac(key: string, ...parts: (string | number)[]): string {
  return createHmac('sha256', key).update(parts.join('\n')).digest('hex');
}

/** A worker's MAC of a result it produced. */
export function signResult(key: string, id: string, attempt: number, text: string): string {
  return 'rw1.' + hmac(key, 'swarm-result', id, attempt, text);
}

/** The hub's MAC of a result it replicates (bound to the worker the hub recorded it from). */
export function hubSignResult(hk: string, id: string, attempt: number, worker: string, text: string): string {
  return 'rh1.' + hmac(hk, 'swarm-result', id, attempt, worker, text);
}

/** True if `mac` is a valid MAC of this result, by the worker it names or by a hub of this swarm. */
export function verifyResult(token: string, id: string, r: { worker: string; attempt: number; text: string; mac?: string }, hk = hubKey(token)): boolean {
  const mac = r.mac;
  if (typeof mac !== 'string') return false;
  if (mac.startsWith('rw1.')) return safeEqual(mac, signResult(workerCredential(token, r.worker), id, r.attempt, r.text));
  if (mac.startsWith('rh1.')) return safeEqual(mac, hubSignResult(hk, id, r.attempt, r.worker, r.text));
  return false;
}

/** A final failure as signed: who decided it, at which attempt, and its error. */
export interface SignedFailure { worker: string; attempt: number; error: { code: string; msg: string }; mac?: string }

/** A worker's MAC of a final failure it decided. */
export function signFailure(key: string, id: string, attempt: number, error: { code: string; msg: string }): string {
  return 'fw1.' + hmac(key, 'swarm-failure', id, attempt, error.code, error.msg);
}

/** The hub's MAC of a final failure it replicates (bound to the worker it names). */
export function hubSignFailure(hk: string, id: string, attempt: number, worker: string, error: { code: string; msg: string }): string {
  return 'fh1.' + hmac(hk, 'swarm-failure', id, attempt, worker, error.code, error.msg);
}

/** True if `f.mac` is a valid MAC of this failure, by the worker it names or by a hub of this swarm. */
export function verifyFailure(token: string, id: string, f: SignedFailure, hk = hubKey(token)): boolean {
  const mac = f.mac;
  if (typeof mac !== 'string' || typeof f.error?.code !== 'string' || typeof f.error.msg !== 'string') return false;
  if (mac.startsWith('fw1.')) return safeEqual(mac, signFailure(workerCredential(token, f.worker), id, f.attempt, f.error));
  if (mac.startsWith('fh1.')) return safeEqual(mac, hubSignFailure(hk, id, f.attempt, f.worker, f.error));
  return false;
}

/** JSON with object keys sorted at every level: the form a spec is signed in (parsers reorder keys). */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return '[' + v.map((x) => (x === undefined ? 'null' : canonicalJson(x))).join(',') + ']';
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJson(o[k])).join(',') + '}';
}

/** A worker's MAC of a task spec it created (an acting coordinator driving a topology run). */
export function signSpec(key: string, workerId: string, spec: unknown): string {
  return 'sw1.' + hmac(key, 'swarm-spec', canonicalJson(spec)) + '.' + workerId;
}

/** The hub's MAC of a task spec it replicates. */
export function hubSignSpec(hk: string, spec: unknown): string {
  return 'sh1.' + hmac(hk, 'swarm-spec', canonicalJson(spec));
}

/**
 * The hub's MAC of a task spec and of the time it accepted the task. The time lets a hub refuse a
 * handback of a task it evicted so long ago that it no longer remembers the id: one it accepted
 * before what it still remembers (see `signedAcceptance`).
 */
export function hubSignSpecAt(hk: string, spec: unknown, at: number): string {
  return `sh2.${at}.` + hmac(hk, 'swarm-spec-at', at, canonicalJson(spec));
}

/** The acceptance time a hub signed into a spec's MAC (`sh2.`), if it did; verify the MAC first. */
export function signedAcceptance(mac: unknown): number | undefined {
  if (typeof mac !== 'string' || !mac.startsWith('sh2.')) return undefined;
  const at = Number(mac.slice(4, mac.indexOf('.', 4)));
  return Number.isSafeInteger(at) && at >= 0 ? at : undefined;
}

/** True if `mac` is a valid MAC of `spec` by a worker of this swarm or by a hub of it. */
export function verifySpec(token: string, spec: unknown, mac: unknown, hk = hubKey(token)): boolean {
  if (typeof mac !== 'string') return false;
  if (mac.startsWith('sh1.')) return safeEqual(mac, hubSignSpec(hk, spec));
  if (mac.startsWith('sh2.')) { const at = signedAcceptance(mac); return at !== undefined && safeEqual(mac, hubSignSpecAt(hk, spec, at)); }
  if (mac.startsWith('sw1.') && mac.length > 4 + 64 + 1 && mac[68] === '.') {
    const worker = mac.slice(69);
    return safeEqual(mac, signSpec(workerCredential(token, worker), worker, spec));
  }
  return false;
}
