/** What dispatch order looks at: priority (higher first), then submission order. */
export interface Ranked { priority?: number; seq?: number; id: string }

/**
 * Priority first, then FIFO within one priority; the id breaks a tie of two tasks without a
 * submission order (merged from elsewhere), so every host sorts the same set the same way.
 */
export function runsBefore(a: Ranked, b: Ranked): boolean { return compareRanked(a, b) < 0; }

/** `runsBefore` as a sort comparator. */
export function compareRanked(a: Ranked, b: Ranked): number {
  const pa = a.priority ?? 0, pb = b.priority ?? 0;
  if (pa !== pb) return pb - pa;
  const sa = a.seq ?? Infinity, sb = b.seq ?? Infinity;
  if (sa !== sb) return sa < sb ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
