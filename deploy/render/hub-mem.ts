/**
 * The hub container's memory from the retention horizon it runs with: the hub's RSS is a fixed part
 * (node, its code, malloc, sockets and buffers) and what grows with the hot state's bytes (the
 * horizon's bytes bound, hub/retention-bytes.ts): V8's heap, let grow to 1.5x what is live
 * (hub/store-heap.ts), and after a restart the journal's read buffers the replayed tasks hold, whose
 * memory malloc keeps once they are freed. The hot state passes its bound while the archive pass
 * catches up, up to `hotCeiling` (hub/retention.ts: then new tasks are refused): the limit holds
 * the hub at that ceiling. Fitted to the soak's peaks (docs/journal.md, "The bytes bound"): 492 MB
 * at 64 MiB hot, 1,007 MB at 256 MiB (each after three hub restarts); 1,000,000 tasks inside the
 * rendered 640 MiB limit (cgroup v1) peaked at 451-502 MB RSS (488 with the old space rendered now),
 * 400-453 MB charged, no OOM kill, in three runs. Without the
 * ceiling the same soak was OOM-killed at 68,000 tasks: the archive pass fell behind the load and
 * the hot state grew past 300 MiB.
 */
import { DEFAULT_RETAIN, fullRetain, hotCeiling, type RetainOptions } from '../../hub/retention.js';
import { oldSpaceFor } from '../../hub/heap-limit.js';

const MiB = 2 ** 20;
/** The hub's RSS besides the hot state: node and its code, malloc, sockets, buffers. */
export const HUB_FIXED_BYTES = 300 * MiB;
/** RSS per byte of the hot state at its peak, as retention counts it: V8's 1.5x growth, garbage, and a restart's replay buffers (the 256 MiB soak peaked at 3.15). */
export const HUB_RSS_PER_HOT_BYTE = 3;
/** Bytes per id the duplicate window allocates (hub/dup-window.ts), at max(count, the default count) ids. */
const WINDOW_BYTES_PER_ID = 90;
/** Above the steady state: a restart's replay, a compaction, the holders' syncs after a failover. */
const HEADROOM = 1.25;

/**
 * The hub's memory request (its steady state) and limit (with headroom), in MiB, for a horizon, and
 * V8's old space inside that limit (`--max-old-space-size`, hub/heap-limit.ts).
 */
export function hubMem(retain: RetainOptions = DEFAULT_RETAIN): { request: number; limit: number; oldSpace: number } {
  const r = fullRetain(retain);
  const window = WINDOW_BYTES_PER_ID * Math.max(r.count, DEFAULT_RETAIN.count);
  const steady = HUB_FIXED_BYTES + HUB_RSS_PER_HOT_BYTE * r.bytes + window;
  const request = Math.ceil(steady / MiB);
  // The most the hub holds: its hot state at the ceiling where new work is refused.
  const peak = HUB_FIXED_BYTES + HUB_RSS_PER_HOT_BYTE * hotCeiling(r.bytes) + window;
  // Whole 64 MiB steps: a limit that reads as chosen, and never under the steady state plus headroom, nor the peak.
  const limit = Math.ceil(Math.max(steady * HEADROOM, peak) / (64 * MiB)) * 64;
  return { request, limit, oldSpace: Math.floor(oldSpaceFor(limit * MiB) / MiB) };
}
