import t from 'tap';
import { simSwarm } from '../helpers/gossip-sim.js';

/**
 * Leases across terms in gossip mode: a lease the new coordinator inherits, a term it never
 * heard of, an assignment lost on the way. Each used to hold its task until the lease lapsed (the
 * hub's leases: 10 minutes) or for ever (fenced assignments are re-sent to the member that fences
 * them); every replica must finish every task, with none lost or recorded twice.
 */

const hubSilent = (sw: ReturnType<typeof simSwarm>) => sw.inGossip();

t.test('leases inherited from the hub that never reached their holder are renewed and run', async (t) => {
  const sw = simSwarm(25, { seed: 31, taskMs: 200 });
  const specs = sw.seedTasks(500);
  // The hub leased 3 tasks to w-005 for 10 minutes, replicated the leases and died before its TASK_REQs left.
  const until = sw.clock.now() + 600_000;
  const lost = ['t-0000', 't-0001', 't-0002'];
  for (const n of sw.nodes) for (const id of lost) n.replica.merge({ id, lease: { worker: 'w-005', attempt: 1, epoch: 0, until } });
  await hubSilent(sw);
  const done = await sw.allDone(500, 60_000);
  t.ok(done !== undefined, `all 500 done in every replica (${done} simulated ms; the hub's leases ran 600 s)`);
  for (const id of lost) t.equal(sw.executions.get(id), 1, `${id} ran once, on its inherited lease`);
  t.equal(sw.nodes[0]!.replica.get('t-0000')?.result?.worker, 'w-005', 'by the member that held the lease');
  t.ok(sw.nodes[0]!.coordinator.stats.renewed >= 3, `the coordinator renewed ${sw.nodes[0]!.coordinator.stats.renewed} inherited leases`);
  await sw.agreed(t, specs);
});

t.test('a term newer than the coordinator\'s, known to the members, does not fence the run off', async (t) => {
  const sw = simSwarm(25, { seed: 37, taskMs: 200 });
  const specs = sw.seedTasks(500);
  await hubSilent(sw);
  await sw.runUntil(() => sw.nodes[0]!.replica.counts().done > 50, 60_000, 50);
  const c = sw.nodes[0]!.coordinator;
  t.ok(c.isCoordinating && c.currentEpoch < 9, `w-000 coordinates under epoch ${c.currentEpoch}`);
  // A lease from a term 9 whose claim never reached w-000 (a member cut off while it coordinated itself):
  // it spreads by anti-entropy, and every member then fences assignments below epoch 9.
  const id = sw.nodes[7]!.replica.openIds().at(-1)!;
  const attempt = (sw.nodes[7]!.replica.get(id)?.lease?.attempt ?? 0) + 1;
  sw.nodes[7]!.replica.merge({ id, lease: { worker: 'w-007', attempt, epoch: 9, until: sw.clock.now() + 600_000 } });
  const done = await sw.allDone(500, 120_000);
  t.ok(done !== undefined, `all 500 done in every replica (${done} simulated ms)`, { counts: sw.nodes[0]!.replica.counts(), entry: sw.nodes[0]!.replica.get(id) });
  t.ok(c.isCoordinating && c.currentEpoch > 9, `w-000 claimed a term above it (epoch ${c.currentEpoch})`);
  t.ok(c.stats.fenced > 0, `members fenced ${c.stats.fenced} assignments and said so`);
  t.ok(sw.nodes[0]!.replica.get(id)?.result, 'the task leased under term 9 is done');
  await sw.agreed(t, specs);
});

t.test('an assignment lost on the way is sent again, not left to its lease', async (t) => {
  const sw = simSwarm(25, { seed: 41, taskMs: 200 });
  const specs = sw.seedTasks(500);
  // Every assignment's first send to w-003 and w-011 is lost (a link dropped with the message in it).
  const seen = new Set<string>();
  sw.net.dropIf = (_from, to, msg) => {
    const m = msg as { t?: string; ch?: string; body?: { id?: string; attempt?: number } };
    if (m.t !== 'app' || m.ch !== 'as' || (to !== 'w-003' && to !== 'w-011')) return false;
    const key = `${to}/${m.body?.id}/${m.body?.attempt}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };
  await hubSilent(sw);
  const done = await sw.allDone(500, 60_000);
  t.ok(seen.size > 0, `${seen.size} assignments lost`);
  t.ok(done !== undefined && done < 60_000, `all 500 done in every replica (${done} simulated ms; a lease lapses only after 10 min)`);
  t.ok(sw.nodes[0]!.coordinator.stats.resent >= seen.size, `${sw.nodes[0]!.coordinator.stats.resent} assignments sent again`);
  t.equal([...sw.executions.values()].filter((x) => x > 1).length, 0, 'no task ran twice');
  await sw.agreed(t, specs);
});

t.test('leases handed back unrun are not attempts; a lease that may have run is', async (t) => {
  const { Replica } = await import('../../worker/gossip/replica.js');
  const r = new Replica();
  r.addTasks([{ id: 'a', max_attempts: 1 }]);
  for (let i = 0; i < 4; i++) { r.lease('a', `w-${i}`, 1, 1000); r.revoke('a', true); }
  t.same(r.get('a')?.lease && { attempt: r.get('a')!.lease!.attempt, unrun: r.get('a')!.lease!.unrun }, { attempt: 4, unrun: 4 }, '4 leases, none run');
  r.lease('a', 'w-9', 1, 1000);
  t.equal(r.get('a')!.lease!.unrun, 4, 'the count is carried onto the next lease');
  // Two members revoke the same lease, one as unrun and one as lapsed: every replica keeps the lapsed one.
  const lapsed = new Replica(), nacked = new Replica();
  for (const x of [lapsed, nacked]) { x.merge({ id: 'a', spec: { id: 'a' }, seq: 0 }); x.merge(r.get('a')!); }
  const d1 = lapsed.revoke('a')!, d2 = nacked.revoke('a', true)!;
  lapsed.merge(d2); nacked.merge(d1);
  t.equal(lapsed.get('a')!.lease!.unrun, 4, 'lapsed revocation wins in one replica…');
  t.equal(nacked.get('a')!.lease!.unrun, 4, '… and in the other');
  t.equal(lapsed.hash(lapsed.get('a')!), nacked.hash(nacked.get('a')!), 'the replicas agree');
});

t.test('in gossip mode a task with caps runs only on members that have them', async (t) => {
  const pool = new Set(['w-010', 'w-011', 'w-012']);
  const sw = simSwarm(25, { seed: 43, taskMs: 100, node: { coordinator: { offersOf: (id) => ({ caps: pool.has(id) ? ['pool:b'] : [] }) } } });
  const specs = Array.from({ length: 200 }, (_, i) => ({ id: `t-${String(i).padStart(4, '0')}`, prompt: `task ${i}`, ...(i % 2 ? { caps: ['pool:b'] } : {}) }));
  for (const n of sw.nodes) n.replica.addTasks(specs);
  await hubSilent(sw);
  const done = await sw.allDone(200, 120_000);
  t.ok(done !== undefined, `all 200 done in every replica (${done} simulated ms)`);
  const r = sw.nodes[0]!.replica;
  const wrong = specs.filter((s) => s.caps && !pool.has(r.get(s.id)?.result?.worker ?? '')).length;
  t.equal(wrong, 0, 'every task with caps ran on a member of its pool');
  const spread = new Set(specs.filter((s) => !s.caps).map((s) => r.get(s.id)?.result?.worker));
  t.ok(spread.size > 10, `tasks without caps ran on ${spread.size} members`);
  await sw.agreed(t, specs);
});

t.test('a task with its own timeout, held by a live member that hangs, runs elsewhere once its timeout and the slack pass', async (t) => {
  // The first run of t-0007 never returns (a hung engine on a member that stays alive and answers probes).
  let hung = false;
  const sw = simSwarm(10, {
    seed: 43, taskMs: 50,
    node: { execute: (spec) => (spec.id === 't-0007' && !hung ? (hung = true, new Promise(() => {})) : new Promise((resolve) => sw.clock.setTimeout(() => resolve({ text: `echo: ${String(spec.prompt)}` }), 50))) },
  });
  const specs = Array.from({ length: 40 }, (_, i) => ({ id: `t-${String(i).padStart(4, '0')}`, prompt: `task ${i}`, timeout_ms: 2000 }));
  for (const n of sw.nodes) n.replica.addTasks(specs);
  await sw.inGossip();
  const done = await sw.allDone(40, 120_000);
  t.ok(hung, 'one run hung');
  // Its lease is the task's timeout plus 30 s of slack, not the 10-minute default.
  t.ok(done !== undefined && done < 60_000, `all 40 done in every replica after ${done} simulated ms`);
  t.equal(sw.nodes[0]!.replica.get('t-0007')?.result?.attempt, 2, 'the hung task finished on its second lease');
  await sw.agreed(t, specs);
});
