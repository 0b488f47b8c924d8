/**
 * The one way the addon patches (addon-patch.ts, addon-fused-step.ts, addon-threadpool.ts) change
 * node-llama-cpp's source: a text put at an anchor that must be there exactly once. An anchor missing,
 * or found twice, means another node-llama-cpp than the one the patch was written for: the build
 * stops there rather than compile a patch put in the wrong place.
 */

/** Where the text goes: before the anchor, after it, or in its place. */
export type SplicePlace = 'before' | 'after' | 'replace';

/** Where `anchor` is in `source`; throws unless it is there exactly once. `file` names the source in the error. */
export function findOnce(source: string, anchor: string, file: string): number {
  const at = source.indexOf(anchor);
  if (at < 0 || source.indexOf(anchor, at + 1) >= 0) {
    throw new Error(`${file}: "${anchor.trim().split('\n')[0]}" was not found exactly once: this node-llama-cpp is not the one the patch was written for`);
  }
  return at;
}

/** `source` with `text` put `place` the anchor (found exactly once, as `findOnce`). */
export function splice(source: string, anchor: string, text: string, place: SplicePlace, file: string): string {
  const at = findOnce(source, anchor, file);
  const cut = place === 'after' ? at + anchor.length : at;
  const rest = place === 'replace' ? at + anchor.length : cut;
  return source.slice(0, cut) + text + source.slice(rest);
}
