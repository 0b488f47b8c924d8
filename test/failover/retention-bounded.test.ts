import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { Mode } from '../../worker/gossip/index.js';
import type { AgentFailover } from '../../worker/failover-agent.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { tempDir } from '../helpers/cli.js';

/**
 * A swarm that runs through its retention horizon many times over, with a failover in the middle
 * (gossip mode copies the hot state into the members that hold it): what each member's replica structures hold
 * stays under the horizon, counted, for holders and the others alike.
 */
const RETAIN = 100;
const BATCH = 250;
const AGENTS = 5;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(ok: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!ok()) { if (Date.now() > end) return false; await sleep(20); }
  return true;
}

t.test('replicas stay bounded by the retention horizon through many horizons and a failover', async (t) => {
  const dir = tempDir(t);
  const opts = { stateDir: dir, retainCount: RETAIN, heartbeatMs: 200, deadAfterMs: 60_000 };
  let h = await startHub(opts);
  let addr = h.addr;
  const pool = new WorkerPool({
    ids: Array.from({ length: AGENTS }, (_, i) => `rb-${i + 1}`), driver: { name: 'echo', options: {} }, slots: 1,
    locate: async () => addr, failover: { host: '127.0.0.1', port: 0 },
  }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; await h.stop(); });
  t.ok(await waitWorkers(h.hub, AGENTS), 'every member joined');
  const agents = pool.agents.map((a) => a!.failover!) as AgentFailover[];

  let next = 0;
  const run = async (n: number) => {
    const total = next + n;
    for (; next < total; next += BATCH) {
      await h.hub.submit(Array.from({ length: BATCH }, (_, k) => ({ id: `rb-t${next + k}`, prompt: `p${next + k}` })));
    }
    // Finished tasks leave the hot state as they go: done once nothing waits or runs.
    return until(() => h.hub.store.queue.pending === 0, 60_000);
  };
  const hotDone = () => { const c = h.hub.store.queue.counts(); return c.done + c.failed; };

  t.ok(await run(1500), 'the first 1,500 tasks ran');
  t.ok(await until(() => hotDone() <= RETAIN, 10_000), 'the hub evicted past the horizon');

  // The hub dies: gossip mode, where anti-entropy gives the members that hold the state (and the
  // acting coordinator) the hot state; the others keep their own.
  await h.hub.stop({ killWorkers: false });
  t.ok(await until(() => agents.every((a) => a.mode === Mode.GOSSIP), 30_000), 'every member is in gossip mode');
  t.ok(await until(() => agents.filter((a) => a.node.replica.size >= RETAIN / 2).every((a) => a.node.sync.pulls) && agents.some((a) => a.node.replica.size >= RETAIN / 2), 15_000), 'gossip mode: the hot state is in the members that hold the state only');

  h = await startHub(opts);
  addr = h.addr;
  t.ok(await waitWorkers(h.hub, AGENTS, 30_000), 'every member rejoined the new hub');
  t.ok(await until(() => agents.every((a) => a.mode === Mode.STAR), 30_000), 'every member handed back and is in star mode');
  // Once the hub says the swarm is back in star mode, a member that holds no state keeps its own results only.
  const holding = () => new Set(h.hub.failover.holders());
  const ownOnly = (a: AgentFailover) => a.node.replica.ids().every((id) => a.node.replica.get(id)!.result?.worker === a.node.id);
  t.ok(await until(() => agents.filter((a) => !holding().has(a.node.id)).every(ownOnly), 15_000), 'the members that hold no state shed what gossip mode gave them');

  t.ok(await run(3000), 'then 3,000 more tasks ran');
  t.ok(await until(() => hotDone() <= RETAIN, 10_000), 'the hub evicted past the horizon again');
  const holders = new Set(h.hub.failover.holders());
  t.ok(holders.size >= 1 && holders.size < AGENTS, `some members hold the state (${[...holders].join(',')}), others do not`);
  // Evictions and the shed reach the members asynchronously; then every count is under the horizon.
  const bounded = (a: AgentFailover) => { const s = a.node.replica.sizes(); return s.entries <= RETAIN && s.open <= RETAIN; };
  await until(() => agents.every(bounded), 15_000);
  for (const a of agents) {
    const s = a.node.replica.sizes();
    const who = `${a.node.id}${holders.has(a.node.id) ? ' (holder)' : ''}`;
    t.ok(s.entries <= RETAIN, `${who}: ${s.entries} entries, at most the horizon's ${RETAIN}`);
    t.ok(s.hashes <= RETAIN && s.inBuckets <= RETAIN && s.open <= RETAIN, `${who}: fingerprints ${s.hashes}, buckets ${s.inBuckets}, open ${s.open}`);
    t.ok(s.unhashed <= 4 * s.entries + 1024, `${who}: ${s.unhashed} merges waiting for their fingerprints`);
    t.ok(a.controller.finalsTracked <= 2 * RETAIN + 1024, `${who}: ${a.controller.finalsTracked} final ids tracked, not the ${next} of the run`);
    t.ok(s.forgotten <= next && s.forgottenOrder <= next, `${who}: ${s.forgotten} evicted ids remembered`);
  }
  t.ok(agents.filter((a) => !holders.has(a.node.id)).every((a) => a.node.replica.sizes().forgotten < next / 2), 'a member that is not a holder remembers only the evicted ids it held');
});
