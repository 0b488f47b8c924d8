import { Heap } from '../../sched/heap.js';
export { seededRandom } from '../../protocol/index.js';

/** A timer handle, opaque to callers. */
export type TimerHandle = { readonly __timer: true } | NodeJS.Timeout;

/**
 * Time as the gossip parts see it. Injected so tests drive time instead of sleeping; every timer in
 * worker/gossip goes through one of these.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(h: TimerHandle | undefined): void;
}

/**
 * Timers of a second or more fall due on a grid of the wall clock: 250 ms, and whole seconds for
 * timers of two seconds or more. Each agent of a worker process is a member with its own probe and
 * hub-watch timers at random phases: 8 agents woke their process 5 times a second for them while
 * idle. On the grid the ones due close together fire in one wake-up, with the process's heartbeats
 * (protocol/shared-clock.ts ticks on whole periods too), for at most a grid step of lateness.
 */
export function onGrid(ms: number, now = Date.now()): number {
  if (ms < 1000) return ms;
  const step = ms >= 2000 ? 1000 : 250;
  return Math.ceil((now + ms) / step) * step - now;
}

/** The wall clock. Timers are unref'd: gossip never keeps a process alive on its own. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, onGrid(ms));
    t.unref();
    return t;
  },
  clearTimeout: (h) => { if (h !== undefined) clearTimeout(h as NodeJS.Timeout); },
};

interface Pending { at: number; seq: number; fn: () => void; dead: boolean }

/**
 * A clock that moves only when told to. `advance(ms)` runs every timer due within the window in
 * time order (timers scheduled while advancing run too if they fall inside it). A binary heap keeps
 * thousands of timers (200 simulated members) cheap; cancelled timers are dropped lazily.
 */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly heap = new Heap<Pending>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq));
  private live = 0;

  constructor(start = 1_000_000) { this.t = start; }

  now(): number { return this.t; }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const p: Pending = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, dead: false };
    this.heap.push(p);
    this.live++;
    return p as unknown as TimerHandle;
  }

  clearTimeout(h: TimerHandle | undefined): void {
    const p = h as unknown as Pending | undefined;
    if (!p || p.dead) return;
    p.dead = true;
    this.live--;
  }

  /** Move time forward by `ms`, firing due timers in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    while (this.heap.size > 0 && this.heap.peek()!.at <= end) {
      const p = this.heap.pop()!;
      if (p.dead) continue;
      p.dead = true;
      this.live--;
      this.t = Math.max(this.t, p.at);
      p.fn();
    }
    this.t = end;
  }

  /** Advance in steps of `step` ms. */
  run(ms: number, step = 10): void {
    for (let done = 0; done < ms; done += step) this.advance(Math.min(step, ms - done));
  }

  /** Timers still waiting. */
  get size(): number { return this.live; }
}


/** `n` distinct random picks from `xs` (fewer if `xs` is short). */
export function pick<T>(xs: readonly T[], n: number, rand: () => number): T[] {
  const a = xs.slice();
  const out: T[] = [];
  while (out.length < n && a.length > 0) {
    const i = Math.floor(rand() * a.length);
    out.push(a[i]!);
    a[i] = a[a.length - 1]!;
    a.pop();
  }
  return out;
}
