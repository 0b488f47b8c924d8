import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { WorkerPool } from '../../worker/index.js';
import { tempDir } from '../helpers/cli.js';
import { quiet, startHub, waitWorkers } from '../helpers/inproc.js';
import { STORIES, alive, missingPrereq } from '../helpers/llama.js';
import { until } from '../helpers/wait.js';

/**
 * Tasks cancelled at the hub in the middle of the batched engine's direct-loop generation, every
 * agent's at once: each agent's next task runs and gives, at temperature 0, the text a fresh engine
 * gives. The whole path: hub, worker, engine process.
 */

const model = fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };
const N = 3;
const PROMPT = 'Lily and Tom went to the park';

async function rig(t: Test) {
  const { hub, addr, stop } = await startHub();
  const dir = tempDir(t);
  const pool = new WorkerPool({
    ids: Array.from({ length: N }, (_, i) => `bc-${i + 1}`), slots: 1, locate: async () => addr,
    driver: { name: 'batched', model: STORIES, options: { dir, threads: '1', sequences: String(N), loop: 'direct', idle_ms: '500' } },
  }, quiet);
  const running = pool.run();
  t.teardown(async () => {
    // The engine leaves idle_ms after its last worker; the test waits for that, and kills a straggler.
    const engines = path.join(dir, 'engines');
    const pids = fs.existsSync(engines) ? fs.readdirSync(engines).filter((f) => f.endsWith('.pid')).map((f) => Number(fs.readFileSync(path.join(engines, f), 'utf8').trim())).filter((p) => p > 0) : [];
    await pool.stop('test over'); await running; await stop();
    await until(() => pids.every((p) => !alive(p)), 10_000);
    for (const p of pids) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ }
  });
  t.ok(await waitWorkers(hub, N, 30_000), 'the agents joined');
  return hub;
}

async function answers(hub: Awaited<ReturnType<typeof rig>>, tag: string): Promise<string[]> {
  const ids = Array.from({ length: N }, (_, i) => `${tag}-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: PROMPT, max_tokens: 32, temperature: 0 })));
  await until(() => ids.every((id) => hub.store.queue.get(id)?.state === 'done'), 60_000);
  return ids.map((id) => hub.store.queue.get(id)?.result?.text ?? `(${hub.store.queue.get(id)?.state})`);
}

t.test("every agent's task cancelled mid-generation: the next tasks answer as on a fresh engine", async (t) => {
  if (missingPrereq(t, model)) return;
  const want = (await answers(await rig(t), 'fresh'))[0]!;
  t.ok(want.length > 0 && !want.startsWith('('), `a fresh engine answers: ${JSON.stringify(want.slice(0, 40))}`);

  const hub = await rig(t);
  const long = Array.from({ length: N }, (_, i) => `long-${i}`);
  await hub.submit(long.map((id, i) => ({ id, prompt: `Once upon a time ${i}`, max_tokens: 4000, temperature: 0 })));
  t.ok(await until(() => long.every((id) => hub.store.queue.get(id)?.state === 'leased'), 30_000), 'every agent is generating');
  await new Promise((r) => setTimeout(r, 1500));
  const c = await hub.cancel(long, 'cancelled by the test');
  t.equal(c.cancelled.length, N, 'all cancelled');
  t.ok(long.every((id) => hub.store.queue.get(id)?.error?.code === 'SWARM_ERR_CANCELLED'), 'each failed SWARM_ERR_CANCELLED');
  const next = await answers(hub, 'next');
  for (const [i, text] of next.entries()) t.equal(text, want, `agent task ${i} answers as a fresh engine`);
  const counts = hub.store.queue.counts();
  t.equal(counts.done, N, 'the next tasks done once each');
  t.equal(counts.failed, N, 'the cancelled ones failed once each');
});
