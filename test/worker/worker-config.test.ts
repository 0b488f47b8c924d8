import t from 'tap';
import { workerConfig, WORKER_DEFAULTS } from '../../worker/index.js';

t.test('worker config: defaults filled, derived bounds computed, frozen', async (t) => {
  const c = workerConfig({ hubMonitor: { lapseMs: 1500 }, agent: { maxLine: 64 * 1024 } });
  t.equal(c.hubMonitor.lapseMs, 1500);
  t.equal(c.hubMonitor.vetoWithinMs, 750, 'the veto window is half the lapse');
  t.equal(c.handback.bytes, 32 * 1024, 'a handback frame fits half a line');
  t.equal(c.coordinator.catchUpMs, WORKER_DEFAULTS.coordinator.catchUpMs, 'defaults fill the rest');
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.hubMonitor), 'frozen');
  t.equal(WORKER_DEFAULTS.hubMonitor.vetoWithinMs, 1500);
});

t.test('worker config: unknown names, wrong types and out-of-range values are refused with a code', async (t) => {
  const code = (f: () => unknown) => { try { f(); return 'ok'; } catch (e) { return (e as { code?: string }).code; } };
  t.equal(code(() => workerConfig({ hubMonitor: { lapsMs: 10 } } as never)), 'SWARM_ERR_CONFIG', 'a misspelt setting');
  t.equal(code(() => workerConfig({ gossip: {} } as never)), 'SWARM_ERR_CONFIG', 'an unknown group');
  t.equal(code(() => workerConfig({ agent: { slots: 0 } })), 'SWARM_ERR_CONFIG', 'below its range');
  t.equal(code(() => workerConfig({ agent: { slots: 1.5 } })), 'SWARM_ERR_CONFIG', 'not an integer');
  t.equal(code(() => workerConfig({ client: { minBackoffMs: 5000, maxBackoffMs: 100 } })), 'SWARM_ERR_CONFIG', 'bounds that contradict');
});

t.test('worker config: the generated check accepts what WorkerConfigSchema accepts, with the same values', async (t) => {
  const { WorkerConfigSchema } = await import('../../worker/config-schema.js');
  const inputs: unknown[] = [{}, { agent: { slots: 4, queue: 0 } }, { agent: { slots: 2000 } }, { agent: { slot: 1 } }, { transport: { maxFrame: 1024 } },
    { transport: { maxFrame: 1023 } }, { sync: { syncIntervalMs: '5' } }, { handback: null }, { coordinator: { maxSends: 1000.5 } }, [], null];
  for (const input of inputs) {
    const z = WorkerConfigSchema.safeParse(input);
    let ours: unknown;
    try { ours = workerConfig(input as never); } catch { ours = undefined; }
    t.equal(ours !== undefined, z.success, `${JSON.stringify(input)}: ${z.success ? 'accepted' : 'refused'} by both`);
    if (z.success && ours) t.match(ours, z.data, 'the same values');
  }
  const mine = { agent: { slots: 3 } };
  workerConfig(mine);
  t.same(mine, { agent: { slots: 3 } }, 'the caller\'s object is left as it was');
});
