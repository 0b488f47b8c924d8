import { ManualClock, seededRandom } from '../../worker/gossip/clock.js';
import { MemNetwork } from '../../worker/gossip/mem-transport.js';
import { Membership } from '../../worker/gossip/membership.js';

/** `n` SWIM members on an in-memory network and one manual clock; all know each other, or only the first (`seedOnly`). */
export function cluster(n: number, seed = 1, opts: { seedOnly?: boolean; relaxed?: boolean } = {}) {
  const clock = new ManualClock();
  const rand = seededRandom(seed);
  const net = new MemNetwork(clock, 2, 0, rand);
  const ids = Array.from({ length: n }, (_, i) => `w-${String(i).padStart(3, '0')}`);
  const nodes = ids.map((id) => new Membership({ id, transport: net.endpoint(id), clock, rand }));
  for (const m of nodes) {
    if (opts.seedOnly) { if (m.id !== ids[0]) m.join(ids[0]!); }
    else for (const id of ids) m.add(id, id);
    if (opts.relaxed !== undefined) m.setRelaxed(opts.relaxed);
    m.start();
  }
  /** Cut member `i` off the network (it keeps running); it and the others. */
  const isolate = (i: number) => {
    const victim = nodes[i]!;
    net.isolate(victim.id);
    return { victim, rest: nodes.filter((m) => m !== victim) };
  };
  /** Stop member `i` and cut it off (kill -9); it and the others. */
  const kill = (i: number) => { nodes[i]!.stop(); return isolate(i); };
  return { clock, net, ids, nodes, kill, isolate };
}

/** Advance the clock in steps until `cond` holds; the simulated ms it took, or undefined past `maxMs`. */
export function runUntil(clock: ManualClock, cond: () => boolean, maxMs: number, step = 50): number | undefined {
  const start = clock.now();
  while (clock.now() - start <= maxMs) {
    if (cond()) return clock.now() - start;
    clock.advance(step);
  }
  return undefined;
}
