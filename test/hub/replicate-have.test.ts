import t, { type Test } from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { Versions } from '../../hub/replicate-resume.js';
import { heldBy } from '../../hub/replicate-held.js';
import { tempDir } from '../helpers/cli.js';
import { finishAsGhost, quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * A holder reconnects to a restarted hub (another process: its version marks mean nothing there).
 * It reports what it holds of the finished tasks (a digest per bucket of ids); the hub sends only the
 * buckets that differ: the tasks finished while the holder was away, those it lost, the open ones.
 * The tasks need a role the holder lacks, so what goes down its link is replication; the test
 * finishes them itself.
 */

const N = 12_000;
const OPEN = 300;
const LATE = 40;
const LOST = 40;
const pad = 'h'.repeat(300);

type Started = Awaited<ReturnType<typeof startHub>>;

/**
 * One holder of `first`'s state, whose hub lookups wait at a gate: `hold()` closes it while the hub
 * is stopped and another started on the same state, `restarted(second)` points the holder there,
 * `letBack()` opens the gate.
 */
async function gatedHolder(t: Test, first: Started, id: string) {
  let addr = first.addr;
  let open: () => void = () => {};
  let gate = Promise.resolve();
  let second: Started | undefined;
  const pool = new WorkerPool({ ids: [id], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => { await gate; return addr; }, failover: { host: '127.0.0.1', port: 0 } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await second?.stop(); });
  t.ok(await waitWorkers(first.hub, 1), 'the holder joined');
  return {
    replica: () => pool.agents[0]?.failover?.node.replica,
    hold: () => { gate = new Promise<void>((r) => { open = r; }); },
    restarted: (h: Started) => { second = h; addr = h.addr; },
    letBack: () => open(),
  };
}

t.test('a holder rejoining a restarted hub gets what it lacks or holds differently, not the whole state', async (t) => {
  const dir = tempDir(t);
  const first = await startHub({ stateDir: dir });
  const ids = Array.from({ length: N }, (_, i) => `hv-${i}`);
  await first.hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  await finishAsGhost(first.hub, N - OPEN);

  // Held back while the hub restarts, so the holder reconnects only once the new hub has changed state.
  const holder = await gatedHolder(t, first, 'hv-w1');
  const replica = holder.replica;
  const agree = (hub: typeof first.hub) => { const r = replica(); return !!r && ids.every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  t.ok(await until(() => agree(first.hub), 60_000), 'the holder has the whole state');

  // The holder loses some finished entries (as a bucket that differs for any reason), then the hub goes.
  const lost = new Set(ids.slice(100, 100 + LOST));
  replica()!.shed((e) => !lost.has(e.id));
  holder.hold();
  await first.hub.stop({ killWorkers: false });

  const second = await startHub({ stateDir: dir });
  holder.restarted(second);
  const hub = second.hub;
  t.equal(hub.store.queue.counts().done, N - OPEN, 'the restarted hub has every finished task');
  // Tasks finished while the holder was away: open in its copy, done here.
  await finishAsGhost(hub, LATE);
  holder.letBack();
  t.ok(await waitWorkers(hub, 1), 'the holder rejoined the restarted hub');
  t.ok(await until(() => agree(hub), 60_000), `the holder's copy equals the restarted hub's state (${replica()?.counts().done} done)`);
  t.ok([...lost].every((id) => replica()?.get(id)?.spec), 'the entries it lost are back, spec and all');

  const s = hub.failover.stats;
  t.equal(s.haveSyncs, 1, 'one sync from what the holder reported');
  // About 16 finished tasks a bucket: the buckets of the late and the lost ones, and the open tasks.
  const bound = OPEN + (LATE + LOST) * 64;
  t.ok(s.haveSent <= bound, `tasks sent: ${s.haveSent} of ${N} (bound ${bound}); left out as held: ${s.haveHeld}`);
  t.ok(s.haveHeld >= N - bound, 'the rest was left out');
  t.equal(hub.store.queue.counts().done, N - OPEN + LATE, 'every finished task recorded once, none lost');
  t.equal(ids.filter((id) => { const r = replica()?.get(id)?.result; return hub.store.queue.get(id)?.state === 'done' && r?.text !== `echo: ${pad} ${id}`; }).length, 0, 'changed 0: the copy holds each result as recorded');
});

/**
 * A restarted hub applies its retention horizon before its holders are back: the tasks it evicted
 * then never reached them. A holder in step with the hub before (its digest the same in every
 * bucket) still matches: the hub counts those evicted tasks in, sends the holder the evictions, and
 * resends no finished task.
 */
t.test('a holder in step before the restart gets no finished task again, though the new hub evicted before it came back', async (t) => {
  const dir = tempDir(t);
  const HOT = 4000, TOTAL = 6000, AFTER = 3500;
  const first = await startHub({ stateDir: dir, retainCount: HOT });
  const ids = Array.from({ length: TOTAL }, (_, i) => `ev-${i}`);
  await first.hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  await finishAsGhost(first.hub, TOTAL);
  const holder = await gatedHolder(t, first, 'ev-w1');
  const replica = holder.replica;
  const hotIds = (hub: typeof first.hub) => [...hub.store.queue.all()].map((r) => r.id);
  const agree = (hub: typeof first.hub) => {
    const r = replica();
    return !!r && r.counts().done === hub.store.queue.counts().done && hotIds(hub).every((id) => r.state(id) === 'done');
  };
  t.ok(await until(() => first.hub.store.queue.counts().done === HOT && agree(first.hub), 60_000), `steady: the hub and the holder hold the same ${HOT} finished tasks (holder ${replica()?.counts().done})`);
  const steady = heldBy({ have: replica()!.have(), all: first.hub.store.queue.all(), versions: new Versions() });
  t.equal(steady?.same, steady?.buckets, `the holder's digest matches the hub's in every bucket (${steady?.same} of ${steady?.buckets})`);

  holder.hold();
  await first.hub.stop({ killWorkers: false });
  // A lower horizon: the new hub evicts within its first second, before the holder is let back.
  const second = await startHub({ stateDir: dir, retainCount: AFTER });
  holder.restarted(second);
  const hub = second.hub;
  t.ok(await until(() => hub.store.queue.counts().done === AFTER, 30_000), `the restarted hub evicted down to ${AFTER}`);
  holder.letBack();
  t.ok(await waitWorkers(hub, 1), 'the holder rejoined the restarted hub');
  t.ok(await until(() => agree(hub), 60_000), `the holder dropped what the new hub evicted (${replica()?.counts().done} done)`);
  const s = hub.failover.stats;
  t.equal(s.haveSyncs, 1, 'one sync from what the holder reported');
  t.equal(s.haveSent, 0, `no finished task sent again (${s.haveHeld} left out as held)`);
  t.equal(s.haveHeld, AFTER, 'every hot task left out');
  const r = replica()!;
  const lost = hotIds(hub).filter((id) => r.state(id) !== 'done').length;
  const changed = hotIds(hub).filter((id) => r.get(id)?.result?.text !== `echo: ${pad} ${id}`).length;
  t.same({ lost, changed, extra: r.counts().done - AFTER }, { lost: 0, changed: 0, extra: 0 }, 'lost 0, changed 0, nothing the hub evicted left in the copy');
});
