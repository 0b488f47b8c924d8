import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { Mode } from '../../worker/gossip/index.js';
import type { AgentFailover } from '../../worker/failover-agent.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { tempDir } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/**
 * In gossip mode only the members that hold the replicated state (those the hub elected, and the acting
 * coordinator) take in the whole state; a member that holds none keeps what concerns the tasks it runs:
 * its own results, the assignments it got. Counted: what each non-holder's replica holds, and what it
 * was sent and left out. The run goes on in gossip mode and ends with every task recorded once.
 */
const N = 600;
const AGENTS = 5;

t.test('members that hold no replica do not pull the whole state in gossip mode', async (t) => {
  const dir = tempDir(t);
  const opts = { stateDir: dir, heartbeatMs: 200, deadAfterMs: 60_000 };
  let h = await startHub(opts);
  let addr = h.addr;
  const pool = new WorkerPool({
    ids: Array.from({ length: AGENTS }, (_, i) => `nh-${i + 1}`), driver: { name: 'echo', options: { latency_ms: '20' } }, slots: 1,
    locate: async () => addr, failover: { host: '127.0.0.1', port: 0 },
  }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; await h.stop(); });
  t.ok(await waitWorkers(h.hub, AGENTS), 'every member joined');
  const agents = pool.agents.map((a) => a!.failover!) as AgentFailover[];
  const ids = Array.from({ length: N }, (_, i) => `nh-t${i}`);
  await h.hub.submit(ids.map((id) => ({ id, prompt: `p ${id}` })));
  t.ok(await until(() => h.hub.store.queue.counts().done >= N / 4 && agents.some((a) => a.node.sync.holds), 60_000), 'a quarter ran, and the hub told its holder');
  const holders = new Set(agents.filter((a) => a.node.sync.holds).map((a) => a.node.id));

  // The hub dies with most of the run left: the acting coordinator dispatches it.
  await h.hub.stop({ killWorkers: false });
  t.ok(await until(() => agents.every((a) => a.mode === Mode.GOSSIP), 30_000), 'every member is in gossip mode');
  const coord = () => agents.find((a) => a.node.coordinator.isCoordinating);
  const final = (a: AgentFailover | undefined) => !!a && ids.every((id) => { const s = a.node.replica.state(id); return s === 'done' || s === 'failed'; });
  t.ok(await until(() => final(coord()), 60_000), 'the acting coordinator has every task final');
  const c = coord()!;
  t.ok(holders.has(c.node.id), `the acting coordinator (${c.node.id}) is the holder`);
  for (const a of agents) {
    if (holders.has(a.node.id) || a === c) continue;
    const r = a.node.replica;
    const mine = r.ids().filter((id) => r.get(id)?.result?.worker === a.node.id).length;
    t.ok(r.size < N / 2, `${a.node.id} holds ${r.size} of ${N} entries (${mine} its own results); left out ${a.node.sync.stats.skipped} deltas and entries of other tasks`);
    const others = r.ids().filter((id) => { const e = r.get(id)!; return !(e.result?.worker === a.node.id || e.lease?.worker === a.node.id || !e.result); });
    // A task it touched (leased to it, then run by another after a lapse or a busy answer) keeps its entry, with the winner's result.
    t.ok(others.length <= 10, `${a.node.id} holds ${others.length} results of others, of tasks it had held`);
  }
  t.ok(agents.filter((a) => !holders.has(a.node.id)).some((a) => a.node.sync.stats.skipped > 0), 'what they were sent of other tasks was left out');

  h = await startHub(opts);
  addr = h.addr;
  t.ok(await until(() => agents.every((a) => a.mode === Mode.STAR), 60_000), 'every member handed back and is in star mode');
  const c2 = h.hub.store.queue.counts();
  t.equal(c2.done + c2.failed + h.hub.store.queue.pending >= N, true, 'the hub knows every task');
  t.ok(await until(() => ids.every((id) => h.hub.store.queue.get(id)?.state === 'done' || h.hub.store.knows(id)), 60_000), 'every task done at the hub: lost 0');
  t.equal(h.hub.metrics.duplicateResults, 0, 'duplicated 0');
});
