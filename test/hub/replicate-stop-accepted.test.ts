import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * The hub stops (a restart, `swarm down`) right after it accepted a large submit. The submit still
 * resolves ("accepted" to the client: the control API is up until hub.stop returns), so its tasks must
 * already be on the holders' wire: a version that built the flush over several turns and gave up on
 * it once stopping answered "accepted" with none of them queued to any holder.
 */

t.test('a submit answered while the hub stops mid-build: its tasks reached the holder', async (t) => {
  const { hub, addr } = await startHub({ deadAfterMs: 300_000 });
  const pool = new WorkerPool({ ids: ['sb-w1'], driver: { name: 'echo', options: {} }, slots: 1, locate: async () => addr, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; });
  t.ok(await waitWorkers(hub, 1), 'the holder joined');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const feed = () => hub.failover.feedViews()[0];
  t.ok(await until(() => !!feed() && !feed()!.syncing, 30_000), 'its first sync ended');

  // 3,000 tasks of 300 characters (~1.2 MB: loopback takes it whole in a turn).
  const ids = Array.from({ length: 3000 }, (_, i) => `sb-${i}`);
  const store = hub.store as unknown as { submitMany: (s: readonly unknown[], o?: unknown) => Promise<unknown> };
  const submitMany = store.submitMany.bind(store);
  let stopping: Promise<void> | undefined;
  // The turn after the store accepted the batch, the hub is asked to stop (its workers keep running).
  store.submitMany = async (s, o) => { const out = await submitMany(s, o); setImmediate(() => { stopping = hub.stop({ killWorkers: false, graceMs: 0 }); }); return out; };
  let answered = false;
  try { await hub.submit(ids.map((id) => ({ id, prompt: `${'s'.repeat(300)} ${id}`, role: 'x' }))); answered = true; } catch { answered = false; }
  await stopping;
  t.ok(answered, 'the submit was answered accepted');
  await until(() => ids.every((id) => replica()?.get(id)?.spec), 5_000);
  const held = ids.filter((id) => replica()?.get(id)?.spec).length;
  t.equal(held, ids.length, `lost 0: the holder holds every accepted task (${held} of ${ids.length})`);
});
