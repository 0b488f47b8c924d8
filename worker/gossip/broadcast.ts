/** One queued broadcast. */
interface Item { key: string; value: unknown; size: number; transmits: number; seq: number }

/**
 * The piggy-back queue (memberlist's TransmitLimitedQueue): each change is sent on up to
 * `limit()` outgoing messages, fewest-sent first, then dropped. A newer change with the same key
 * replaces the older one, so the queue holds at most one entry per member or task.
 */
export class BroadcastQueue {
  private readonly items = new Map<string, Item>();
  private seq = 0;

  constructor(private readonly limit: () => number, private readonly maxItems = 4096) {}

  /** Queue `value` under `key`, replacing any older entry for the key. */
  push(key: string, value: unknown): void {
    this.items.delete(key);
    this.items.set(key, { key, value, size: approxSize(value), transmits: 0, seq: this.seq++ });
    if (this.items.size > this.maxItems) {
      // Bounded: drop the most-sent entry; anti-entropy (full sync) repairs what gossip missed.
      let worst: Item | undefined;
      for (const it of this.items.values()) if (!worst || it.transmits > worst.transmits) worst = it;
      if (worst) this.items.delete(worst.key);
    }
  }

  /** Take up to `maxItems` entries within `maxBytes`, counting one transmission for each. */
  take(maxItems: number, maxBytes: number, filter?: (key: string) => boolean): unknown[] {
    if (this.items.size === 0) return [];
    const cand = [...this.items.values()].filter((it) => !filter || filter(it.key));
    cand.sort((a, b) => a.transmits - b.transmits || b.seq - a.seq);
    const out: unknown[] = [];
    let bytes = 0;
    const lim = this.limit();
    for (const it of cand) {
      if (out.length >= maxItems) break;
      if (bytes + it.size > maxBytes) continue;
      bytes += it.size;
      out.push(it.value);
      if (++it.transmits >= lim) this.items.delete(it.key);
    }
    return out;
  }

  get size(): number { return this.items.size; }
}

/** Rough encoded size (JSON length); good enough to bound a frame well below its hard limit. */
export function approxSize(v: unknown): number {
  try { return JSON.stringify(v)?.length ?? 8; } catch { return 1024; }
}
