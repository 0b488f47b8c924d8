import t from 'tap';
import { Hub, hubConfig } from '../../hub/index.js';
import { WorkerPool } from '../../worker/index.js';
import { Mode } from '../../worker/gossip/index.js';
import { verifyResult } from '../../protocol/result-mac.js';
import { tempDir } from '../helpers/cli.js';
import { quiet, waitTasks, waitWorkers } from '../helpers/inproc.js';

const TOKEN = 'failover-identity-token-0123456789';

/**
 * With a token, every result a failover worker records carries its MAC, and a hub restarted after
 * gossip mode takes the handback back: nothing refused as forged, every task recorded once.
 */
t.test('hub down mid-run with a token: gossip results come back signed, none refused as forged, each recorded once', async (t) => {
  const dir = tempDir(t);
  const cfg = (port: number) => hubConfig({ port, fsyncMs: 0, token: TOKEN, stateDir: dir });
  let hub = new Hub(cfg(0), quiet);
  const addr = await hub.start();
  const pool = new WorkerPool({
    ids: ['fi-1', 'fi-2', 'fi-3', 'fi-4'], driver: { name: 'echo', options: { latency_ms: '40' } },
    locate: async () => addr, token: TOKEN, slots: 2, failover: { host: '127.0.0.1', port: 0 },
  }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; await hub.stop(); });
  t.ok(await waitWorkers(hub, 4), 'the failover workers joined');
  const ids = Array.from({ length: 120 }, (_, i) => `fi-t${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  const deadline = Date.now() + 20_000;
  while (hub.store.queue.counts().done < 15 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await hub.stop();
  const agents = pool.agents.map((a) => a.failover!);
  const wait = async (ok: () => boolean, ms: number) => { const end = Date.now() + ms; while (!ok() && Date.now() < end) await new Promise((r) => setTimeout(r, 50)); return ok(); };
  t.ok(await wait(() => agents.every((a) => a.mode === Mode.GOSSIP), 20_000), 'every worker went to gossip mode');
  t.ok(await wait(() => agents.some((a) => ids.every((id) => a.node.replica.get(id)?.result)), 60_000), 'the run finished without the hub');
  const replica = agents.find((a) => ids.every((id) => a.node.replica.get(id)?.result))!.node.replica;
  const unsigned = ids.filter((id) => {
    const r = replica.get(id)!.result!;
    return !verifyResult(TOKEN, id, { ...r, text: r.text! });
  });
  t.same(unsigned, [], 'every result in the replica carries a valid MAC (of its worker, or of the hub)');

  hub = new Hub(cfg(addr.port), quiet);
  await hub.start();
  t.ok(await waitTasks(hub, ids.length, 30_000), 'the restarted hub has every task final');
  t.ok(await wait(() => agents.every((a) => a.mode === Mode.STAR), 20_000), 'every worker is back in star mode');
  // A genuine entry for a task the restarted hub leased meanwhile to another worker is not recorded
  // over that lease (the holder answers it, from its replica if it has the result).
  t.equal(hub.failover.stats.refused, 0, `no handback entry refused as unverifiable (${hub.failover.stats.leaseHeld} left to a live lease)`);
  t.ok(hub.failover.stats.recorded > 0, `the handback recorded ${hub.failover.stats.recorded}`);
  for (const id of ids) if (hub.store.queue.get(id)?.result?.text !== `echo: ${id}`) t.fail(`${id}: ${JSON.stringify(hub.store.queue.get(id)?.result)}`);
  t.equal(hub.metrics.duplicateResults, 0, 'none recorded twice');
});
