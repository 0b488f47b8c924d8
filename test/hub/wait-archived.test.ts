import t from 'tap';
import { startControlled, startPool, waitWorkers } from '../helpers/inproc.js';
import { tempDir } from '../helpers/cli.js';

/**
 * A waiter that reads its results after they passed the horizon: the bytes bound evicts a few large
 * results within seconds, so `swarm submit --wait` of big tasks asked for ids no longer hot and got
 * SWARM_ERR_UNKNOWN_TASK for tasks that had run. /wait reads them back from the archive.
 */
t.test('/wait answers tasks archived before it was asked, streamed or whole; an id never submitted is still unknown', async (t) => {
  const { hub, addr, port } = await startControlled(t, { stateDir: tempDir(t), retainCount: 2 });
  const pool = startPool(addr, 2);
  t.teardown(() => pool.stop());
  t.ok(await waitWorkers(hub, 2), 'two agents joined');
  const ids = Array.from({ length: 10 }, (_, i) => `a-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  const deadline = Date.now() + 20_000;
  while (ids.some((id) => hub.store.queue.get(id)?.state !== 'done') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await hub.store.evict();
  const hot = ids.filter((id) => hub.store.queue.has(id));
  t.ok(hot.length <= 2, `${hot.length} of 10 hot, the rest archived`);

  const call = async (body: unknown): Promise<{ status: number; lines: Record<string, unknown>[] }> => {
    const res = await fetch(`http://127.0.0.1:${port}/wait`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    const text = await res.text();
    return { status: res.status, lines: text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>) };
  };
  const whole = await call({ ids, timeout_ms: 5_000 });
  t.equal(whole.status, 200);
  const tasks = (whole.lines[0] as { complete: boolean; tasks: { id: string; state: string; text?: string }[] });
  t.equal(tasks.complete, true, 'complete');
  t.same(tasks.tasks.map((x) => [x.id, x.state, x.text]), ids.map((id) => [id, 'done', `echo: ${id}`]), 'every task done, with its own result, in the order asked');

  const streamed = await call({ ids, timeout_ms: 5_000, stream: true });
  t.equal(streamed.status, 200);
  const got = streamed.lines.filter((l) => typeof l.id === 'string');
  t.same(got.map((l) => l.id).sort(), [...ids].sort(), 'streamed: every task once');
  t.ok(got.every((l) => l.state === 'done' && l.text === `echo: ${String(l.id)}`), 'streamed: each with its result');
  t.same(streamed.lines.at(-1), { complete: true, final: 10 });

  const unknown = await call({ ids: ['a-0', 'never-submitted'], timeout_ms: 100 });
  t.equal(unknown.status, 404, 'an id never submitted');
  t.match(unknown.lines[0], { code: 'SWARM_ERR_UNKNOWN_TASK', msg: /never-submitted/ });
});
