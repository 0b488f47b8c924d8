/** A per-node seed derived from the run seed and the node id (FNV-1a), so replays repeat exactly. */
export function nodeSeed(runSeed: number, node: string): number {
  let h = 0x811c9dc5 ^ (runSeed >>> 0);
  for (let i = 0; i < node.length; i++) {
    h ^= node.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) & 0x7fffffff;
}
