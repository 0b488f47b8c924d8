import t, { type Test } from 'tap';
import { WorkerPool } from '../../worker/index.js';
import type { Message } from '../../protocol/index.js';
import { tempDir } from '../helpers/cli.js';
import { finishAsGhost, quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

/**
 * A holder rejoins a restarted hub (another process: its version marks mean nothing there) and
 * reports a digest of what it holds. The digest buckets that differ are compared task by task
 * (SYNC_IDS, SYNC_WANT), so what goes is what differs: the tasks it lost, those finished while it was
 * away, the open ones; not every task of a bucket that holds one of those. The tasks need a role the
 * holder lacks, so what goes down its link is replication; the test finishes them itself.
 */

const N = 5000;
const OPEN = 200;
const LATE = 30;
const pad = 'i'.repeat(300);

type Started = Awaited<ReturnType<typeof startHub>>;

/** A hub with N tasks, all but OPEN finished, and one holder of its state whose hub lookups wait at a gate while the hub restarts. */
async function holderOfRestarted(t: Test, prefix: string, lost: number, failover: { syncIds?: boolean } = {}, hubOpts: Parameters<typeof startHub>[0] = {}) {
  const dir = tempDir(t);
  const first = await startHub({ stateDir: dir, ...hubOpts });
  const ids = Array.from({ length: N }, (_, i) => `${prefix}-${i}`);
  await first.hub.submit(ids.map((id) => ({ id, prompt: `${pad} ${id}`, role: 'x' })));
  await finishAsGhost(first.hub, N - OPEN);
  let addr = first.addr;
  let open: () => void = () => {};
  let gate = Promise.resolve();
  let second: Started | undefined;
  const pool = new WorkerPool({ ids: [`${prefix}-w1`], driver: { name: 'echo', options: {} }, slots: 2, locate: async () => { await gate; return addr; }, failover: { host: '127.0.0.1', port: 0, ...failover } }, quiet);
  const running = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await running; await second?.stop(); });
  t.ok(await waitWorkers(first.hub, 1), 'the holder joined');
  const replica = () => pool.agents[0]?.failover?.node.replica;
  const agree = (hub: Started['hub']) => { const r = replica(); return !!r && ids.every((id) => r.state(id) === hub.store.queue.get(id)?.state); };
  t.ok(await until(() => agree(first.hub), 60_000), 'the holder has the whole state');

  // The holder loses finished entries spread over many buckets (as a copy that differs for any reason), then the hub goes.
  const gone = new Set(ids.filter((_, i) => i % Math.floor((N - OPEN) / lost) === 7).slice(0, lost));
  replica()!.shed((e) => !gone.has(e.id));
  gate = new Promise<void>((r) => { open = r; });
  await first.hub.stop({ killWorkers: false });

  second = await startHub({ stateDir: dir, ...hubOpts });
  addr = second.addr;
  const hub = second.hub;
  // Tasks finished while the holder was away: open in its copy, done here.
  await finishAsGhost(hub, LATE);
  return {
    hub, ids, gone, replica, pool, agree: () => agree(hub),
    letBack: () => open(),
    /** Lost (a finished task not in the copy), duplicated (recorded twice here), changed (another text). */
    check: () => {
      const r = replica()!;
      const done = ids.filter((id) => hub.store.queue.get(id)?.state === 'done');
      return {
        lost: done.filter((id) => r.state(id) !== 'done').length,
        duplicated: hub.metrics.duplicateResults,
        changed: done.filter((id) => r.get(id)?.result?.text !== `echo: ${pad} ${id}`).length,
      };
    },
  };
}

t.test('the differing buckets compared id by id: the tasks sent are about those that differ', async (t) => {
  const LOST = 120;
  const h = await holderOfRestarted(t, 'pi', LOST);
  h.letBack();
  t.ok(await waitWorkers(h.hub, 1), 'the holder rejoined the restarted hub');
  t.ok(await until(h.agree, 60_000), `the holder's copy equals the restarted hub's state (${h.replica()?.counts().done} done)`);
  t.ok([...h.gone].every((id) => h.replica()?.get(id)?.spec), 'the entries it lost are back, spec and all');
  const s = h.hub.failover.stats;
  t.equal(s.haveSyncs, 1, 'one sync from what the holder reported');
  t.equal(s.idsExchanges, 1, 'one per-id comparison');
  // The open tasks as the holder left them (LATE of them finished since), and those it lost.
  const differ = OPEN + LOST;
  t.ok(s.haveSame < s.haveBuckets, `buckets that matched: ${s.haveSame} of ${s.haveBuckets}`);
  // What differs, and no more: whole buckets sent every task of a bucket that held one of those.
  t.ok(s.haveSent >= differ && s.haveSent <= differ + 5, `tasks sent: ${s.haveSent}, what differs: ${differ} (${OPEN} open, ${LATE} of them finished while away, ${LOST} lost); ids named: ${s.idsNamed}, wanted: ${s.idsWanted}`);
  // Sub-bucket values first: the ids named are those of the sub-buckets that differ, not of whole buckets.
  t.ok(s.idsSums > 0, `sub-bucket values sent: ${s.idsSums}`);
  t.ok(s.idsNamed < 3 * (LOST + LATE), `ids named: ${s.idsNamed} for ${LOST + LATE} finished tasks that differ`);
  t.same(h.check(), { lost: 0, duplicated: 0, changed: 0 }, 'lost 0, duplicated 0, changed 0');
  t.equal(h.hub.store.queue.counts().done, N - OPEN + LATE, 'every finished task recorded once');
});

t.test('a link cut mid-exchange: the holder reconnects, the answers it gave are kept, the rest is asked', async (t) => {
  const LOST = 600;
  // A small outbound bound: SYNC_IDS frames of about 16 KiB, many of them.
  const h = await holderOfRestarted(t, 'pc', LOST, {}, { maxOutbound: 128 * 1024 });
  // The holder answers the sub-bucket values and the first SYNC_IDS that names ids, then stalls (a
  // link gone quiet) until the hub side cuts it.
  const copy = h.pool.agents[0]!.failover!.copy;
  const answer = copy.syncIds.bind(copy);
  let seen = 0, sums = 0, stall = true;
  copy.syncIds = (m: Message<'SYNC_IDS'>) => { if (!stall || (m.payload.k !== undefined && ++sums) || seen++ < 1) answer(m); };
  h.letBack();
  t.ok(await waitWorkers(h.hub, 1), 'the holder rejoined the restarted hub');
  const s = h.hub.failover.stats;
  t.ok(await until(() => s.idsAnswers >= sums + 1 && seen >= 2, 30_000), 'it answered one frame and holds the next');
  stall = false;
  const w = [...h.hub.registry.all()][0]!;
  w.conn.socket.destroy();
  t.ok(await until(() => s.idsExchanges === 1, 60_000), 'after the reconnect the exchange finished');
  t.ok(await until(h.agree, 60_000), `the holder's copy equals the restarted hub's state (${h.replica()?.counts().done} done)`);
  t.equal(s.idsGivenUp, 1, 'the exchange the cut interrupted stopped there');
  t.ok(s.idsReused >= 1, `buckets answered before the cut were not asked again: ${s.idsReused}`);
  t.ok(s.idsFrames > 2, `SYNC_IDS frames: ${s.idsFrames}`);
  const differ = OPEN + LOST;
  t.ok(s.haveSent >= differ && s.haveSent <= differ + 5, `tasks sent: ${s.haveSent}, what differs: ${differ}`);
  t.equal(h.hub.metrics.protocolErrors.get('SWARM_ERR_BACKPRESSURE') ?? 0, 0, 'no link was cut for backpressure');
  t.same(h.check(), { lost: 0, duplicated: 0, changed: 0 }, 'lost 0, duplicated 0, changed 0');
});

t.test('a holder that does not answer SYNC_IDS still syncs: its differing buckets go whole', async (t) => {
  const LOST = 120;
  const h = await holderOfRestarted(t, 'po', LOST, { syncIds: false });
  h.letBack();
  t.ok(await waitWorkers(h.hub, 1), 'the holder rejoined the restarted hub');
  t.ok(await until(h.agree, 60_000), `the holder's copy equals the restarted hub's state (${h.replica()?.counts().done} done)`);
  const s = h.hub.failover.stats;
  t.equal(s.haveSyncs, 1, 'one sync from what the holder reported');
  t.equal(s.idsFrames, 0, 'no SYNC_IDS to a holder that did not offer it');
  t.ok(s.haveSent > OPEN + LOST, `tasks sent: ${s.haveSent} (whole buckets), left out as held: ${s.haveHeld}`);
  t.same(h.check(), { lost: 0, duplicated: 0, changed: 0 }, 'lost 0, duplicated 0, changed 0');
});
