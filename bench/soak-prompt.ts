/**
 * The soak's prompts: the prompt of task i is a function of i alone (so a checker can tell a changed
 * answer), 100 B to 16 KB, log-uniform; words of 40 characters keep a 16 KB prompt under the 512-token cap.
 */

/** A small seeded generator. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}

export function soakPrompt(i: number): string {
  const r = rng(i * 2654435761);
  const size = Math.floor(100 * Math.pow(16384 / 100, r()));
  let s = `soak ${i}`;
  while (s.length < size) s += ' ' + Math.floor(r() * 2 ** 52).toString(36).padEnd(11, 'z').repeat(4).slice(0, 40);
  return s.slice(0, size);
}
