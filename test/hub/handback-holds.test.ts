import t from 'tap';
import { HandbackHolds, type HoldClock } from '../../hub/handback-holds.js';
import type { WorkerEntry } from '../../hub/registry.js';
import { quiet } from '../helpers/inproc.js';

/** A clock the test drives: timers fire only when `advance` passes their time. */
class DrivenClock implements HoldClock {
  private t = 1_000_000;
  private timers = new Map<number, { at: number; fn: () => void }>();
  private next = 1;
  now(): number { return this.t; }
  setTimeout(fn: () => void, ms: number): unknown { const h = this.next++; this.timers.set(h, { at: this.t + ms, fn }); return h; }
  clearTimeout(h: unknown): void { this.timers.delete(h as number); }
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = Math.max(this.t, due[1].at);
      due[1].fn();
    }
    this.t = end;
  }
}

function setup(opts: { idleMs?: number; maxMs?: number } = {}) {
  const clock = new DrivenClock();
  const queued = new Set(Array.from({ length: 27 }, (_, i) => `q-${i}`));
  const held = new Set<string>();
  const store = {
    awaitHandback: (id: string) => { if (!queued.has(id) || held.has(id)) return false; held.add(id); return true; },
    handbackEnded: (id: string) => held.delete(id),
  };
  let ready = 0;
  const holds = new HandbackHolds(() => store as never, quiet, () => { ready++; }, { ...opts, clock });
  return { clock, holds, held, queued: [...queued], readyCount: () => ready };
}
const worker = (id: string) => ({ id }) as unknown as WorkerEntry;

t.test('empty HANDBACK frames do not renew a hold', async (t) => {
  const { clock, holds, held, queued, readyCount } = setup();
  const w = worker('w-9');
  holds.hold(w, queued);
  t.equal(holds.size, 27, 'every queued id the offer named is held');
  // The reported pattern: an empty `HANDBACK {"entries":[]}` every 5 s.
  for (let s = 5; s < 15; s += 5) { clock.advance(5000); holds.touch(w, []); }
  t.equal(holds.size, 27, 'still held within the idle bound');
  clock.advance(5000);
  t.equal(holds.size, 0, '15 s after the offer the hold is over, empty frames or not');
  t.equal(held.size, 0, 'the tasks are queued for dispatch again');
  t.equal(readyCount(), 1, 'and the dispatcher is woken');
  t.equal(holds.expired, 27);
  holds.hold(w, queued);
  t.equal(holds.size, 0, 'the same connection offering again holds nothing');
  holds.hold(worker('w-9'), queued.slice(0, 3));
  t.equal(holds.size, 3, 'a new connection gets a window of its own');
});

t.test('frames that bring held entries renew the idle bound, up to the fixed bound', async (t) => {
  const { clock, holds, queued } = setup({ idleMs: 15_000, maxMs: 60_000 });
  const w = worker('w-1');
  holds.hold(w, queued);
  let sent = 0;
  // A slow but genuine handback: one held entry every 10 s.
  for (let s = 10; s < 60; s += 10) {
    clock.advance(10_000);
    const id = queued[sent++]!;
    holds.touch(w, [id]);
    holds.release(w, [id]);
  }
  t.equal(holds.size, 27 - 5, 'each entry frame kept the rest held past the idle bound');
  // Offers within the window add ids but do not extend it.
  holds.hold(w, queued.slice(5));
  clock.advance(9_999);
  t.equal(holds.size, 22, 'held until the fixed bound');
  clock.advance(1);
  t.equal(holds.size, 0, '60 s after the offer the hold is over whatever arrives');
});

t.test('a hold ends when its entries arrive or the worker is back in star mode', async (t) => {
  const { clock, holds, queued } = setup();
  const w = worker('w-2');
  holds.hold(w, queued.slice(0, 4));
  holds.touch(w, queued.slice(0, 2));
  holds.release(w, queued.slice(0, 2));
  t.equal(holds.size, 2);
  holds.release(w);
  t.equal(holds.size, 0, 'star mode: the rest go');
  clock.advance(120_000);
  t.equal(holds.expired, 0, 'no bound was needed');
});

t.test('an id one worker is asked for is not asked of a second until that hold ends', async (t) => {
  const { clock, holds, queued } = setup();
  const a = worker('w-a');
  const b = worker('w-b');
  t.same(holds.hold(a, queued.slice(0, 4)), queued.slice(0, 4), 'the first offer is wanted whole');
  t.same(holds.hold(b, [...queued.slice(2, 6), 'unknown-1']), [...queued.slice(4, 6), 'unknown-1'], 'the second: only what no hold awaits');
  t.same(holds.hold(a, queued.slice(0, 2)), queued.slice(0, 2), 'the holder offering again is still asked');
  t.equal(holds.size, 6);
  holds.release(a, queued.slice(0, 1));
  t.same(holds.hold(worker('w-c'), queued.slice(0, 1)), queued.slice(0, 1), 'an entry that arrived frees its id');
  clock.advance(15_000);
  t.equal(holds.size, 0, 'the holds ran out');
  t.same(holds.hold(b, queued.slice(2, 4)), queued.slice(2, 4), 'once the hold is over the others are asked');
});

t.test('an id that cannot be held (leased already, or unknown) is asked of one worker at a time too', async (t) => {
  // A restarted hub leases its replayed queue at once, before the offers come: such ids are not held,
  // and were asked of every worker that offered them (failover-handback: 437 wanted of 425 missing).
  const { clock, holds } = setup();
  const a = worker('w-a');
  const b = worker('w-b');
  const leased = ['l-1', 'l-2', 'l-3'];
  t.same(holds.hold(a, leased), leased, 'the first offerer is asked');
  t.equal(holds.size, 0, 'nothing held: they are leased');
  t.same(holds.hold(b, [...leased, 'l-4']), ['l-4'], 'a second offerer is not asked for them again');
  t.same(holds.hold(a, leased.slice(0, 1)), leased.slice(0, 1), 'the one asked offering again is still asked');
  holds.release(a, ['l-1']);
  t.same(holds.hold(b, leased), ['l-1'], 'an entry that came frees its id (still not final: another may bring it)');
  holds.release(a);
  t.same(holds.hold(worker('w-c'), ['l-2']), ['l-2'], 'the first offerer back in star mode or gone: the others are asked');
  clock.advance(15_000);
  t.same(holds.hold(a, ['l-2', 'l-3']), ['l-2', 'l-3'], 'and once the idle bound passes, whoever offers');
});

t.test('an entry refused as another worker\'s live lease is not asked of others meanwhile', async (t) => {
  const { clock, holds } = setup();
  const a = worker('w-a');
  t.same(holds.hold(a, ['l-1', 'l-2']), ['l-1', 'l-2']);
  holds.release(a, ['l-1', 'l-2']);
  holds.leaseAnswers(['l-1']);
  t.same(holds.hold(worker('w-b'), ['l-1', 'l-2']), ['l-2'], 'the lease answers l-1; l-2 came and is still not final, so another may bring it');
  holds.release(a);
  t.same(holds.hold(worker('w-d'), ['l-1']), [], 'the one that brought it back in star mode: still not asked');
  clock.advance(15_000);
  t.same(holds.hold(worker('w-c'), ['l-1']), ['l-1'], 'past the idle bound it is asked again');
});
