import t from 'tap';
import { journal, tempDir, until } from '../helpers/cli.js';
import { startHub as startHubInProc } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { allInMode, expectExactlyOnce, hubDone, hubStatus, killGroup, procs, startHub, startWorkers, submit, expectReplicasDone } from '../helpers/failover.js';

/**
 * Ids-first handback: a worker offers task ids, the hub answers with the ids it lacks
 * (unknown, or not final), and only those entries travel. The handback then costs what the hub
 * lacks, not the run's history.
 */

t.test('HANDBACK offer over a real socket: the hub wants exactly the ids it lacks, then records them once', async (t) => {
  const { hub, addr, stop } = await startHubInProc();
  const w = await RawWorker.connect(addr);
  t.teardown(async () => { w.destroy(); await stop(); });
  t.equal((await w.handshake({ worker_id: 'hb-1', codecs: ['ndjson'], peer_addr: '127.0.0.1:9' }))?.type, 'HANDSHAKE_ACK');
  // a-1, a-2 final at the hub; a-3 known, not final (leased to this raw worker, which never answers); u-1 unknown.
  await hub.submit([{ id: 'a-1', prompt: 'one' }, { id: 'a-2', prompt: 'two' }, { id: 'a-3', prompt: 'three' }]);
  t.equal(await hub.store.complete('a-1', { text: 'one!', worker: 'x', attempt: 1 }), 'recorded');
  t.equal(await hub.store.complete('a-2', { text: 'two!', worker: 'x', attempt: 1 }), 'recorded');

  const o1 = w.send('HANDBACK', { entries: [], offer: ['a-1', 'a-2', 'a-3', 'u-1'] });
  const a1 = await w.next((f) => f.re === o1);
  t.equal(a1?.type, 'ACK', 'an offer is acknowledged');
  t.same([...(a1?.payload.want as string[])].sort(), ['a-3', 'u-1'], 'the hub wants the unknown and the not-final ids only');
  t.equal(hub.store.queue.get('a-3')?.state === 'done', false, 'an offer merges nothing');

  const e1 = w.send('HANDBACK', { entries: [
    { id: 'a-3', result: { worker: 'hb-1', attempt: 1, text: 'three!' } },
    { id: 'u-1', spec: { id: 'u-1', prompt: 'gossip-born' }, seq: 9, result: { worker: 'hb-1', attempt: 1, text: 'born!' } },
  ] });
  t.match((await w.next((f) => f.re === e1))?.payload, { ok: true, recorded: 2, duplicate: 0 }, 'the wanted entries are recorded');
  t.equal(hub.store.queue.get('u-1')?.result?.text, 'born!', 'an unknown task is submitted, then completed');

  const o2 = w.send('HANDBACK', { entries: [], offer: ['a-1', 'a-2', 'a-3', 'u-1'] });
  t.same((await w.next((f) => f.re === o2))?.payload.want, [], 'offered again: nothing wanted');

  // The old full handback still works: everything is offered as entries, known results are duplicates.
  const e2 = w.send('HANDBACK', { entries: [{ id: 'a-1', result: { worker: 'hb-1', attempt: 2, text: 'other' } }] });
  t.match((await w.next((f) => f.re === e2))?.payload, { ok: true, recorded: 0, duplicate: 1 }, 'a full HANDBACK is still merged by id');
  t.equal(hub.store.queue.get('a-1')?.result?.text, 'one!', 'the first result stands');
  t.match(hub.failover.stats, { offers: 2, offered: 8, wanted: 2, entries: 3, recorded: 2, duplicate: 1 });
});

/** Task ids with a result in the journal (what a hub restarted on this state dir replays as done). */
function journaledFinal(dir: string): Set<string> {
  const s = new Set<string>();
  for (const r of journal(dir) as { t: string; id?: string }[]) if ((r.t === 'result' || r.t === 'fail') && r.id) s.add(r.id);
  return s;
}

t.test('a hub restarted after gossip mode is sent only the entries it lacks, not the history', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  let hub = ps.add(await startHub(dir));
  ps.add(startWorkers(dir, 25, 'w', ['--driver-opt', 'latency_ms=20']));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === 25, 20_000, 100), 'all workers joined with a peer port');
  // History: 600 tasks finished in star mode.
  const history = await submit(dir, 600, 'h');
  t.ok(await hubDone(dir, 600, 60_000), 'the history finished in star mode');
  const ids = await submit(dir, 500, 't');
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= 660, 20_000, 10), 'the run is under way');
  killGroup(hub, 'SIGKILL');
  t.ok(await allInMode(dir, 'gossip', 25, 15_000), 'every worker went to gossip mode');
  await expectReplicasDone(t, dir, 1100, 120_000, 'the workers finished the run without the hub');
  // What the restarted hub will replay: everything else is what it lacks.
  const had = journaledFinal(dir);
  const resultsBefore = (journal(dir) as { t: string }[]).filter((r) => r.t === 'result').length;
  const missing = [...history, ...ids].filter((id) => !had.has(id));
  t.comment(`at the restart the journal has ${had.size} of 1100 final; ${missing.length} missing`);
  t.ok(missing.length > 0, 'the hub was killed with tasks unfinished');
  hub = ps.add(await startHub(dir));
  t.ok(await hubDone(dir, 1100, 30_000), 'the restarted hub has every task final');
  t.ok(await allInMode(dir, 'star', 25, 20_000), 'every worker is back in star mode');
  const s = (await hubStatus(dir)) as unknown as { failover: { offered: number; wanted: number; entries: number; recorded: number; duplicate: number; leaseHeld: number; offers: number; handbacks: number } };
  const f = s.failover;
  t.comment(`handback: ${f.offers} offer frames, ${f.offered} ids offered, ${f.wanted} wanted, ${f.handbacks} entry frames, ${f.entries} entries, ${f.recorded} recorded, ${f.duplicate} duplicate`);
  t.ok(f.offered >= had.size, 'the history was offered (as ids)');
  t.equal(f.entries, f.wanted, 'the workers sent exactly the entries the hub wanted');
  t.ok(f.wanted <= missing.length, `the hub wanted only what it lacked (${f.wanted} <= ${missing.length})`);
  t.ok(f.entries < had.size, `entries sent (${f.entries}) are fewer than the history the hub had (${had.size})`);
  // Each handed-back entry was a missing task: recorded, or a duplicate of a result the hub got meanwhile by TASK_RES.
  // ... or was left to the lease the restarted hub gave another connected worker meanwhile (that worker answers it).
  t.equal(f.recorded + f.duplicate + f.leaseHeld, f.entries, 'every entry sent was recorded, raced with a TASK_RES, or left to a live lease');
  // Wanted ids came from the missing set: every result recorded after the restart is of a missing task.
  const after = (journal(dir) as { t: string; id?: string }[]).filter((r) => r.t === 'result' && r.id).slice(resultsBefore).map((r) => r.id!);
  const missingSet = new Set(missing);
  t.equal(after.filter((id) => !missingSet.has(id)).length, 0, 'results recorded after the restart are all of missing tasks');
  t.equal(after.length, missing.length, 'and every missing task got one');
  expectExactlyOnce(t, dir, [...history, ...ids]);
});
