/**
 * A small seeded PRNG (mulberry32), uniform in [0, 1): simulations, shuffles and bootstraps replay
 * exactly from their seed on every host (the gossip sim, the acting coordinator's jitter, experiments).
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
