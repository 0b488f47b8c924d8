import t from 'tap';
import net from 'node:net';
import { Hub, hubConfig } from '../../hub/index.js';
import { TaskStore } from '../../hub/store.js';
import { quiet, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { tempDir } from '../helpers/cli.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

t.test('a restarted hub binds before its replay: workers connect and wait, join once it has replayed, and nothing runs before', async (t) => {
  const dir = tempDir(t);
  const first = new Hub(hubConfig({ port: 0, fsyncMs: 0, stateDir: dir }), quiet);
  const { port } = await first.start();
  const pool = startPool({ host: '127.0.0.1', port }, 2);
  t.teardown(() => pool.stop());
  t.ok(await waitWorkers(first, 2), 'two workers joined the first hub');
  await first.submit(Array.from({ length: 20 }, (_, i) => ({ id: `a-${i}`, prompt: `a ${i}` })));
  t.ok(await waitTasks(first, 20), 'the first hub ran 20 tasks');
  // The workers stay: they lose their links and dial the port again.
  await first.stop({ killWorkers: false });

  // A replay that takes longer than a worker's default handshake wait (5 s): the links held meanwhile stay.
  const open = TaskStore.open.bind(TaskStore);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let opened = false;
  TaskStore.open = async (...args: Parameters<typeof TaskStore.open>) => { await gate; opened = true; return open(...args); };
  t.teardown(() => { TaskStore.open = open; });

  const second = new Hub(hubConfig({ port, fsyncMs: 0, stateDir: dir }), quiet);
  t.teardown(() => second.stop({ killWorkers: true, graceMs: 1000 }));
  const starting = second.start();
  let bound = false;
  for (let i = 0; i < 200 && !bound; i++) { bound = await connects(port); if (!bound) await sleep(25); }
  t.ok(bound, 'the port answers while the journal is still being replayed');
  // Each worker dials within a fraction of a second of the bind; from then on its link waits.
  await sleep(1000);
  const cut: string[] = [];
  for (const a of pool.pool.agents) a.client.onStatus((s) => { if (s.type === 'reconnecting') cut.push(`${s.error}`); });
  await sleep(5500);
  t.equal(opened, false, 'still replaying');
  t.equal(second.registry.size, 0, 'no worker joins before the replay has ended');

  release();
  await starting;
  t.ok(await waitWorkers(second, 2), 'both workers joined once it had replayed');
  t.same(cut, [], 'no worker gave up its held link and dialed again');
  t.equal(second.store.queue.counts().done, 20, 'the first hub\'s results were replayed');
  await second.submit(Array.from({ length: 10 }, (_, i) => ({ id: `b-${i}`, prompt: `b ${i}` })));
  t.ok(await waitTasks(second, 30), 'new work runs on the restarted hub');
  for (let i = 0; i < 10; i++) t.equal(second.store.queue.get(`b-${i}`)?.result?.text, `echo: b ${i}`);
  t.equal(second.metrics.duplicateResults, 0, 'no result recorded twice');
});
