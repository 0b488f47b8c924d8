import fs from 'node:fs';
import t from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { pidsMentioning, until } from '../helpers/cli.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';

t.test('engine killed mid-generation: the worker reports ERROR, restarts its engine, and the task is retried and recorded once', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const h = await startHub({ maxAttempts: 3 });
  h.hub.watchers = 1; // as a dashboard would: workers send partial answers only while someone watches
  const pool = new WorkerPool({ ids: ['k-1'], driver: { name: 'embedded', model: STORIES, options: { ctx: '2048' } }, locate: async () => h.addr }, quiet);
  const done = pool.run();
  t.teardown(async () => { await pool.stop('test over'); await done; await h.stop(); });
  t.ok(await waitWorkers(h.hub, 1));
  // The engine host is a node process (its fd-3 watcher is a sh that mentions the same script).
  // Only this process's children: other test files run engines at the same time.
  const engines = () => pidsMentioning('embedded/host').filter((pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      return ppid === process.pid && fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'node';
    } catch { return false; }
  });
  t.ok(await until(() => engines().length === 1, 60_000), 'one engine running');
  const [first] = engines();
  // Kill once the answer is streaming (the hub holds partial text for the lease). On a busy machine
  // a short answer can arrive in one burst before we look; then try again with a fresh task.
  let id = '';
  for (let i = 1; i <= 4 && !id; i++) {
    const tid = `long-${i}`;
    await h.hub.submit([{ id: tid, prompt: 'Once upon a time', max_tokens: 2000, temperature: 0 }]);
    const seen = await until(() => (h.hub.registry.get('k-1')?.inflight.get(tid)?.answer.bytes ?? 0) > 0 || h.hub.store.queue.get(tid)?.state === 'done', 60_000, 2);
    if (seen && h.hub.store.queue.get(tid)?.state !== 'done') id = tid;
  }
  t.ok(id, 'generation under way');
  if (!id) return;
  process.kill(first!, 'SIGKILL');
  t.ok(await until(() => h.hub.store.queue.get(id)?.state === 'done', 120_000), 'the task finished');
  const rec = h.hub.store.queue.get(id)!;
  t.equal(rec.state, 'done');
  t.equal(rec.attempts, 2, 'the first attempt died with the engine, the second completed');
  t.ok((rec.result?.text.length ?? 0) > 0, 'an answer');
  t.same(h.hub.store.queue.counts(), { queued: 0, leased: 0, done: Number(id.slice(5)), failed: 0 }, 'recorded once');
  t.equal(h.hub.metrics.duplicateResults, 0);
  const now = engines();
  t.equal(now.length, 1, 'one engine again');
  t.not(now[0], first, 'a new engine process');
});
