import { createHash, timingSafeEqual } from 'node:crypto';

/** Compare two secrets in constant time (hashing first so lengths do not leak). */
export function safeEqual(a: string | undefined, b: string): boolean {
  if (a === undefined) return false;
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}
