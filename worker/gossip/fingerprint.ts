/**
 * Fingerprints of replica entries: FNV-1a over strings and numbers into one running state, and the
 * mix that places an (id, entry hash) pair in its bucket's XOR. A merge is a state holder's hot path,
 * so nothing here builds a string.
 */

/** FNV-1a, 32 bit, of a string, continuing from `h`. */
export function fnvStr(s: string, h = 0x811c9dc5): number {
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193); }
  return h;
}
/** FNV-1a step over a number (its low and high 32 bits), continuing from `h`. */
export function fnvNum(n: number, h: number): number {
  h = Math.imul(h ^ (n | 0), 0x01000193);
  return Math.imul(h ^ ((n / 4294967296) | 0), 0x01000193);
}
export const fnv = (s: string): number => fnvStr(s) >>> 0;

/** An entry's fingerprint in its bucket: its id's hash and its merge hash mixed (murmur3's finalizer), no strings built. */
export function pairHash(idh: number, h: number): number {
  let x = (idh ^ Math.imul(h, 0x9e3779b1)) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}
