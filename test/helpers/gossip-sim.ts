import type { Test } from 'tap';
import { ManualClock, seededRandom } from '../../worker/gossip/clock.js';
import { MemNetwork } from '../../worker/gossip/mem-transport.js';
import { GossipNode, type GossipNodeOptions } from '../../worker/gossip/node.js';
import type { ReplicaSpec } from '../../worker/gossip/replica.js';

/** A simulated swarm of gossip nodes on an in-memory network, all driven by one manual clock. */
export function simSwarm(n: number, opts: { seed?: number; latencyMs?: number; taskMs?: number; node?: Partial<GossipNodeOptions> } = {}) {
  const clock = new ManualClock();
  const rand = seededRandom(opts.seed ?? 1);
  const net = new MemNetwork(clock, 2, 0, rand);
  const ids = Array.from({ length: n }, (_, i) => `w-${String(i).padStart(3, '0')}`);
  const executions = new Map<string, number>();
  const dead = new Set<string>();
  const nodes = ids.map((id) => new GossipNode({
    id, transport: net.endpoint(id), clock, rand,
    execute: (spec) => new Promise((resolve) => {
      executions.set(spec.id, (executions.get(spec.id) ?? 0) + 1);
      // A dead worker never answers (kill -9 in the middle of a task).
      clock.setTimeout(() => { if (!dead.has(id)) resolve({ text: `echo: ${String(spec.prompt)}` }); }, opts.taskMs ?? 50);
    }),
    ...opts.node,
  }));
  for (const nd of nodes) {
    for (const id of ids) nd.membership.add(id, id);
    nd.start();
  }
  return {
    clock, net, ids, nodes, executions,
    /** Replicate `k` tasks to every node, as the hub does in star mode. */
    seedTasks(k: number): ReplicaSpec[] {
      const specs = Array.from({ length: k }, (_, i) => ({ id: `t-${String(i).padStart(4, '0')}`, prompt: `task ${i}` }));
      for (const nd of nodes) nd.replica.addTasks(specs);
      return specs;
    },
    /** Hub heartbeats reach every live node. */
    hubBeat(): void { for (const nd of nodes) if (!dead.has(nd.id)) nd.hub.heard(); },
    kill(nd: GossipNode): void { dead.add(nd.id); nd.stop(); net.isolate(nd.id); },
    live(): GossipNode[] { return nodes.filter((x) => !dead.has(x.id)); },
    /** Time until every node is in gossip mode (the hub went silent), bounded at 20 simulated s. */
    inGossip(): Promise<number | undefined> { return this.runUntil(() => nodes.every((n) => n.mode === 'gossip'), 20_000); },
    /** Time until every node (or every live one) holds `count` done tasks, or undefined past `maxMs`. */
    allDone(count: number, maxMs: number, among: () => GossipNode[] = () => nodes): Promise<number | undefined> {
      return this.runUntil(() => among().every((n) => n.replica.counts().done === count), maxMs, 50);
    },
    /** Let the replicas converge, count lost and disagreeing results (both must be 0), and stop every node. */
    async agreed(t: Test, specs: ReplicaSpec[]): Promise<void> {
      const live = nodes.filter((x) => !dead.has(x.id));
      await this.runUntil(() => audit(live, specs).disagree === 0, 60_000, 100);
      t.same(audit(live, specs), { lost: 0, disagree: 0 }, 'no lost or duplicated results');
      for (const n of nodes) n.stop();
    },
    /** Advance simulated time in steps, letting promise continuations run between steps. */
    async runUntil(cond: () => boolean, maxMs: number, step = 20, each?: () => void): Promise<number | undefined> {
      const start = clock.now();
      while (clock.now() - start <= maxMs) {
        if (cond()) return clock.now() - start;
        each?.();
        clock.advance(step);
        await new Promise((r) => setImmediate(r));
      }
      return undefined;
    },
  };
}

/** Lost and duplicated results across replicas: every task done once, and every replica agrees on the winner. */
export function audit(nodes: GossipNode[], specs: ReplicaSpec[]) {
  let lost = 0;
  let disagree = 0;
  for (const s of specs) {
    const winners = new Set<string>();
    for (const nd of nodes) {
      const r = nd.replica.get(s.id)?.result;
      if (!r) { lost++; continue; }
      winners.add(`${r.worker}/${r.attempt}/${r.text}`);
    }
    if (winners.size > 1) disagree++;
  }
  return { lost, disagree };
}

/** `n` nodes (50 ms tasks) that ran `tasks` tasks to the end in gossip mode, the hub having gone silent: a handback's starting point. */
export async function ranInGossip(n: number, seed: number, tasks: number) {
  const sw = simSwarm(n, { seed, taskMs: 50 });
  const specs = sw.seedTasks(tasks);
  await sw.inGossip();
  await sw.allDone(tasks, 120_000);
  return { sw, specs };
}
