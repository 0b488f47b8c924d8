import t, { type Test } from 'tap';
import net from 'node:net';
import { Hub, hubConfig } from '../../hub/index.js';
import { TaskStore } from '../../hub/store.js';
import { WorkerPool } from '../../worker/index.js';
import { quiet, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { tempDir } from '../helpers/cli.js';
import { sleep, until } from '../helpers/wait.js';

/**
 * A restarted hub binds its port before it replays its journal and holds each link unread until
 * then. Failover workers whose links are held must not take that silence for a dead hub: a replay
 * longer than the failover trigger (lapse 3 s + suspicion) goes by in star mode, and they rejoin
 * the new hub. A hub whose port stays closed still fails over.
 */

const N = 4;

async function firstHub(t: Test, dir: string) {
  const hub = new Hub(hubConfig({ port: 0, fsyncMs: 0, stateDir: dir }), quiet);
  const { port } = await hub.start();
  const pool = new WorkerPool({
    ids: Array.from({ length: N }, (_, i) => `fr-${i + 1}`), driver: { name: 'echo', options: {} },
    locate: async () => ({ host: '127.0.0.1', port }), failover: { host: '127.0.0.1', port: 0 },
  }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; });
  t.ok(await waitWorkers(hub, N), 'the workers joined the first hub');
  // Every agent knows its peers (the hub's PEERS) before the hub goes.
  t.ok(await until(() => pool.agents.every((a) => (a.failover?.node.membership.live().length ?? 0) >= N), 15_000), 'the members know each other');
  await hub.submit(Array.from({ length: 40 }, (_, i) => ({ id: `a-${i}`, prompt: `a ${i}` })));
  t.ok(await waitTasks(hub, 40), 'the first hub ran 40 tasks');
  return { hub, port, pool };
}

const modes = (pool: WorkerPool) => pool.agents.map((a) => a.failover?.mode ?? 'none');

t.test('a hub replaying longer than the failover trigger: held links keep the workers in star mode, and they rejoin it', async (t) => {
  const dir = tempDir(t);
  const { hub: first, port, pool } = await firstHub(t, dir);
  const seen = new Set<string>();
  const watch = setInterval(() => { for (const m of modes(pool)) seen.add(m); }, 50);
  t.teardown(() => clearInterval(watch));
  await first.stop({ killWorkers: false });

  // The replay is held for 8 s: past lapse + the longest suspicion.
  const open = TaskStore.open.bind(TaskStore);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  TaskStore.open = async (...args: Parameters<typeof TaskStore.open>) => { await gate; return open(...args); };
  t.teardown(() => { TaskStore.open = open; });
  const second = new Hub(hubConfig({ port, fsyncMs: 0, stateDir: dir }), quiet);
  t.teardown(() => second.stop({ killWorkers: true, graceMs: 1000 }));
  const starting = second.start();
  await sleep(8000);
  release();
  await starting;
  t.ok(await waitWorkers(second, N, 20_000), 'every worker joined the restarted hub');
  clearInterval(watch);
  const declared = pool.agents.reduce((s, a) => s + (a.failover?.node.hub.stats.declared ?? 0), 0);
  t.comment(`modes seen: ${[...seen].join(',')}; hub declared dead ${declared} times`);
  t.same([...seen], ['star'], 'no worker entered gossip mode or coordinated');
  t.equal(declared, 0, 'no worker declared the hub dead');

  await second.submit(Array.from({ length: 40 }, (_, i) => ({ id: `b-${i}`, prompt: `b ${i}` })));
  t.ok(await waitTasks(second, 80), 'new work runs on the restarted hub');
  const ids = [...Array.from({ length: 40 }, (_, i) => `a-${i}`), ...Array.from({ length: 40 }, (_, i) => `b-${i}`)];
  const lost = ids.filter((id) => second.store.queue.get(id)?.state !== 'done');
  const wrong = ids.filter((id) => second.store.queue.get(id)?.result?.text !== `echo: ${id.replace('-', ' ')}`);
  t.same(lost, [], 'lost 0');
  t.same(wrong, [], 'every result as produced');
  t.equal(second.metrics.duplicateResults, 0, 'duplicated 0');
});

t.test('a hub whose port stays closed is still failed over', async (t) => {
  const dir = tempDir(t);
  const { hub, pool } = await firstHub(t, dir);
  await hub.stop({ killWorkers: false });
  const gone = Date.now();
  t.ok(await until(() => modes(pool).every((m) => m === 'gossip'), 30_000, 50), 'every worker is in gossip mode');
  t.comment(`in gossip mode ${Date.now() - gone} ms after the hub went`);
});

t.test('a port that accepts but never answers: failover once the ACK wait runs out', async (t) => {
  const dir = tempDir(t);
  const { hub, port, pool } = await firstHub(t, dir);
  await hub.stop({ killWorkers: false });
  // Something holds the port and reads nothing (a hub wedged in its replay).
  const held: net.Socket[] = [];
  const mute = net.createServer((s) => { held.push(s); s.on('error', () => {}); });
  await new Promise<void>((r) => mute.listen(port, '127.0.0.1', () => r()));
  t.teardown(() => { for (const s of held) s.destroy(); return new Promise<void>((r) => mute.close(() => r())); });
  const gone = Date.now();
  t.ok(await until(() => modes(pool).every((m) => m === 'gossip'), 45_000, 50), 'every worker is in gossip mode');
  t.comment(`in gossip mode ${Date.now() - gone} ms after the hub went (the ACK wait is 15 s)`);
  t.ok(held.length >= N, `the mute port held ${held.length} links meanwhile`);
});
