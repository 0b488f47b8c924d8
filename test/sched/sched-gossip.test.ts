import t from 'tap';
import { TaskQueue } from '../../hub/index.js';
import { simSwarm } from '../helpers/gossip-sim.js';
import type { ReplicaSpec } from '../../worker/gossip/index.js';

/**
 * The hub and the acting coordinator run one scheduling core (sched/): the same tasks go out in the
 * same order whichever of them dispatches, and gossip mode keeps priority and backoff.
 */

const hubSilent = (sw: ReturnType<typeof simSwarm>) => sw.inGossip();

/** 60 tasks, mixed priorities, some needing a cap only two of three workers have. */
function taskSet(): ReplicaSpec[] {
  let x = 7;
  const rnd = () => (x = (x * 48271) % 2147483647) / 2147483647;
  return Array.from({ length: 60 }, (_, i) => ({
    id: `t-${String(i).padStart(3, '0')}`, prompt: `task ${i}`, priority: Math.floor(rnd() * 4) * 10,
    ...(i % 4 === 0 ? { caps: ['gpu'] } : {}),
  }));
}
const workers = [{ id: 'w-000', caps: ['gpu'] }, { id: 'w-001', caps: ['gpu'] }, { id: 'w-002', caps: [] as string[] }];

/** The order of first leases, per routing key (within a key, the order is the rule's, whoever frees first). */
const byKey = (order: string[], specs: ReplicaSpec[]) => {
  const caps = new Set(specs.filter((s) => s.caps).map((s) => s.id));
  return { gpu: order.filter((id) => caps.has(id)), plain: order.filter((id) => !caps.has(id)) };
};

t.test('the hub and an acting coordinator dispatch the same task set in the same order', async (t) => {
  const specs = taskSet();
  const q = new TaskQueue({ maxDepth: 1000, leaseMs: 60_000, defaultMaxAttempts: 3 });
  for (const s of specs) q.add({ ...s, priority: s.priority as number } as never);
  const hubOrder: string[] = [];
  while (hubOrder.length < specs.length) {
    const round = workers.map((w) => q.next(w)).filter((r) => r !== undefined);
    for (const r of round) { hubOrder.push(r.id); q.complete(r.id, { text: 'ok', worker: r.worker!, attempt: 1 }); }
  }

  const sw = simSwarm(3, { seed: 5, taskMs: 50, node: { coordinator: { offersOf: (id) => workers.find((w) => w.id === id) } } });
  for (const n of sw.nodes) n.replica.addTasks(specs);
  // First leases only: a lease renewed under a later term is the same lease.
  const leased = new Set<string>();
  sw.nodes[0]!.replica.onChange((_e, d) => { if (d.lease && !d.lease.revoked && d.lease.epoch > 0) leased.add(d.id); });
  await hubSilent(sw);
  const done = await sw.runUntil(() => sw.nodes.every((n) => n.replica.counts().done === specs.length), 60_000, 20);
  t.ok(done !== undefined, `all ${specs.length} done in every replica`);
  const gossipOrder = [...leased];
  t.equal(gossipOrder.length, specs.length, 'every task leased');

  const sorted = [...specs].sort((a, b) => (b.priority as number) - (a.priority as number) || (a.id < b.id ? -1 : 1)).map((s) => s.id);
  t.same(byKey(hubOrder, specs), byKey(sorted, specs), 'the hub: priority, then submission order, per routing key');
  t.same(byKey(gossipOrder, specs), byKey(hubOrder, specs), 'the coordinator: the same order as the hub');
  const r = sw.nodes[0]!.replica;
  t.equal(specs.filter((s) => s.caps && r.get(s.id)?.result?.worker === 'w-002').length, 0, 'no gpu task ran on the worker without the cap');
  await sw.agreed(t, specs);
});

t.test('in gossip mode a failed task backs off before its next attempt, and its attempts run out', async (t) => {
  const runs = new Map<string, number[]>();
  const fails = new Map<string, number[]>();
  let sw!: ReturnType<typeof simSwarm>;
  sw = simSwarm(3, {
    seed: 11, node: {
      coordinator: { backoffMs: 4000 },
      execute: (spec) => new Promise((resolve) => {
        const at = sw.clock.now();
        (runs.get(spec.id) ?? runs.set(spec.id, []).get(spec.id)!).push(at);
        sw.clock.setTimeout(() => {
          const n = runs.get(spec.id)!.length;
          if (spec.id === 'ok' || (spec.id === 'flaky' && n >= 2)) resolve({ text: 'done' });
          else { (fails.get(spec.id) ?? fails.set(spec.id, []).get(spec.id)!).push(sw.clock.now()); resolve({ error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'boom' } }); }
        }, 50);
      }),
    },
  });
  const specs: ReplicaSpec[] = [{ id: 'flaky', prompt: 'f' }, { id: 'doomed', prompt: 'd', max_attempts: 2 }, { id: 'ok', prompt: 'o' }];
  for (const n of sw.nodes) n.replica.addTasks(specs);
  await hubSilent(sw);
  const done = await sw.runUntil(() => sw.nodes.every((n) => n.replica.counts().done === 2 && n.replica.counts().failed === 1), 60_000, 20);
  t.ok(done !== undefined, 'two tasks done and one failed in every replica');
  const gap = runs.get('flaky')![1]! - fails.get('flaky')![0]!;
  t.ok(gap >= 2000, `the retry waited for its backoff (${gap} simulated ms; half of 4000 at least)`);
  t.equal(runs.get('doomed')!.length, 2, 'a task that keeps failing runs its max_attempts times');
  t.equal(sw.nodes[1]!.replica.get('doomed')!.failure!.error!.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
  t.equal(runs.get('ok')!.length, 1);
  for (const n of sw.nodes) n.stop();
});
