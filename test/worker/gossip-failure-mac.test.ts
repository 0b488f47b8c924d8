import t from 'tap';
import { workerCredential } from '../../protocol/index.js';
import { verifyFailure } from '../../protocol/result-mac.js';
import type { ReplicaSpec } from '../../worker/gossip/replica.js';
import { simSwarm } from '../helpers/gossip-sim.js';

/**
 * Every final failure gossip mode decides carries the MAC of the member that decided it, so a hub
 * takes it back as that failure: retries used up (sched's afterFailure), and a task leased 3 x its
 * max_attempts without an answer (afterLeaseLost).
 */
const TOKEN = 'gossip-failure-mac-token-0123456789';

t.test('failures decided in gossip mode are signed by the member that decided them', async (t) => {
  let sw!: ReturnType<typeof simSwarm>;
  sw = simSwarm(3, {
    seed: 5, node: {
      coordinator: { backoffMs: 100 },
      execute: (spec) => new Promise((resolve) => {
        // `doomed` fails on every run; `silent` never answers (its lease lapses every time).
        if (spec.id === 'silent') return;
        sw.clock.setTimeout(() => resolve({ error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'boom' } }), 20);
      }),
    },
  });
  for (const n of sw.nodes) n.replica.signer = { id: n.id, key: workerCredential(TOKEN, n.id) };
  const specs: ReplicaSpec[] = [{ id: 'doomed', prompt: 'd', max_attempts: 2 }, { id: 'silent', prompt: 's', max_attempts: 1, timeout_ms: 200 }];
  for (const n of sw.nodes) n.replica.addTasks(specs);
  await sw.inGossip();
  const failed = await sw.runUntil(() => sw.nodes.every((n) => n.replica.counts().failed === 2), 120_000, 20);
  t.ok(failed !== undefined, 'both tasks failed for good in every replica');
  for (const id of ['doomed', 'silent']) {
    const f = sw.nodes[2]!.replica.get(id)!.failure!;
    t.equal(f.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED', `${id}: ${f.error?.msg}`);
    t.match(f.mac, /^fw1\.[0-9a-f]{64}$/, `${id}: signed`);
    t.ok(verifyFailure(TOKEN, id, { worker: f.worker, attempt: f.attempt, error: f.error!, mac: f.mac }), `${id}: the MAC verifies for ${f.worker}`);
    t.notOk(verifyFailure(TOKEN, id, { worker: 'w-999', attempt: f.attempt, error: f.error!, mac: f.mac }), `${id}: and for no other worker`);
  }
  t.match(sw.nodes[0]!.replica.get('silent')!.failure!.error!.msg, /leased 3 times without a result/, 'silent: the lost-lease bound');
  for (const n of sw.nodes) n.stop();
});
