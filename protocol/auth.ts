import { createHash, timingSafeEqual } from 'node:crypto';

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
