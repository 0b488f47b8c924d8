import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** Compare two secrets in constant time (hashing first so lengths do not leak). */
export function safeEqual(a: string | undefined, b: string): boolean {
  if (a === undefined) return false;
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/**
 * Tokens that are not secrets: the deploy examples' placeholder and its like, or anything too short
 * to guess slowly. A hub reachable from other machines refuses them.
 */
export function isPlaceholderToken(token: string): boolean {
  return token.length < 16 || /REPLACE|CHANGE-?ME|PLACEHOLDER|^(secret|token|password)$/i.test(token);
}

/**
 * A worker's own credential: HMAC-SHA256 of its id under the swarm token, hex, prefixed `wc1.`.
 * A worker given only this (not the token) can join as that id and no other, so it cannot take
 * over another worker's id, answer for its tasks or become a replication holder by its name.
 */
export function workerCredential(token: string, workerId: string): string {
  return 'wc1.' + createHmac('sha256', token).update(`swarm-worker:${workerId}`).digest('hex');
}

/**
 * The secret failover peers share on their peer links, derived from the swarm token, so workers
 * that hold only their own credential can still gossip with each other.
 */
export function peerSecret(token: string): string {
  return 'wp1.' + createHmac('sha256', token).update('swarm-peers').digest('hex');
}
