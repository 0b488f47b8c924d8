// Apart from generate.ts: a worker imports this, and must not load node-llama-cpp (about 10 MB of its memory).
/** How many leading tokens of `want` the sequence holds already (at least one token is always evaluated). */
export function cachedPrefix<T>(held: readonly T[], want: readonly T[]): number {
  const max = Math.min(held.length, want.length - 1);
  let i = 0;
  while (i < max && held[i] === want[i]) i++;
  return i;
}
