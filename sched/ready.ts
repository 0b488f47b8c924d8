import { Heap } from './heap.js';
import { runsBefore, type Ranked } from './order.js';
import { canRun, routeKey, type Needs, type Offers } from './route.js';

/** One task as the ready set sees it. */
export interface ReadyItem<T> { id: string; rank: Ranked; needs: Needs; value: T }

interface Slot<T> { item: ReadyItem<T>; token: number; readyAt: number }
interface Bucket<T> { role: string; caps: string[]; heap: Heap<Slot<T>> }

const slotBefore = <T>(a: Slot<T>, b: Slot<T>): boolean => runsBefore(a.item.rank, b.item.rank);

/**
 * The tasks waiting to run, and which one a given worker should run next: the best by priority then
 * FIFO among those whose role and caps it satisfies, and whose backoff has passed. One heap per
 * routing key, so a pick costs O(keys + log n) however many tasks wait. Removal is lazy: a task taken
 * out (leased elsewhere, finished, cancelled) leaves a stale heap slot that is skipped.
 *
 * The hub keeps one for its whole life; the acting coordinator builds one per dispatch pass from its
 * replica. Both pick with `next`, so both hosts run the same input in the same order.
 */
export class ReadySet<T> {
  private readonly buckets = new Map<string, Bucket<T>>();
  private readonly delayed = new Heap<Slot<T>>((a, b) => a.readyAt < b.readyAt);
  private readonly live = new Map<string, number>();
  private token = 0;

  constructor(private readonly clock: () => number) {}

  /** Tasks in the set (ready or backing off). */
  get size(): number { return this.live.size; }
  has(id: string): boolean { return this.live.has(id); }

  /** Add (or re-add) a task, runnable from `readyAt` (epoch ms; now when absent). */
  add(item: ReadyItem<T>, readyAt?: number): void {
    const s: Slot<T> = { item, token: ++this.token, readyAt: readyAt ?? 0 };
    this.live.set(item.id, s.token);
    if (s.readyAt > this.clock()) this.delayed.push(s);
    else this.bucket(item.needs).heap.push(s);
  }

  /** Take a task out (it was leased, finished or cancelled). */
  delete(id: string): boolean { return this.live.delete(id); }

  /** The best task this worker ('any': one that may run anything) may run now, taken out of the set. */
  next(w: Offers | 'any'): ReadyItem<T> | undefined {
    const best = this.best(w);
    if (!best) return undefined;
    best.heap.pop();
    this.live.delete(best.top.item.id);
    return best.top.item;
  }

  /** The task `next(w)` would take now, left in the set. */
  peek(w: Offers | 'any'): ReadyItem<T> | undefined { return this.best(w)?.top.item; }

  /** When the earliest backed-off task becomes ready (epoch ms), if any. */
  nextReadyAt(): number | undefined {
    for (;;) {
      const top = this.delayed.peek();
      if (!top) return undefined;
      if (this.isLive(top)) return top.readyAt;
      this.delayed.pop();
    }
  }

  private best(w: Offers | 'any'): { heap: Heap<Slot<T>>; top: Slot<T> } | undefined {
    this.promote();
    let best: Bucket<T> | undefined;
    let bestTop: Slot<T> | undefined;
    for (const [key, b] of this.buckets) {
      if (w !== 'any' && !canRun(w, b)) continue;
      const top = this.cleanTop(b);
      if (!top) { this.buckets.delete(key); continue; }
      if (!bestTop || slotBefore(top, bestTop)) { best = b; bestTop = top; }
    }
    return best && bestTop ? { heap: best.heap, top: bestTop } : undefined;
  }

  private bucket(needs: Needs): Bucket<T> {
    const { key, role, caps } = routeKey(needs);
    let b = this.buckets.get(key);
    if (!b) { b = { role, caps, heap: new Heap(slotBefore) }; this.buckets.set(key, b); }
    return b;
  }

  private isLive(s: Slot<T>): boolean { return this.live.get(s.item.id) === s.token; }

  /** Move backed-off tasks whose time has come into the ready heaps. */
  private promote(): void {
    const now = this.clock();
    for (;;) {
      const top = this.delayed.peek();
      if (!top || top.readyAt > now) return;
      this.delayed.pop();
      if (this.isLive(top)) this.bucket(top.item.needs).heap.push(top);
    }
  }

  private cleanTop(b: Bucket<T>): Slot<T> | undefined {
    for (;;) {
      const top = b.heap.peek();
      if (!top) return undefined;
      if (this.isLive(top)) return top;
      b.heap.pop();
    }
  }
}
