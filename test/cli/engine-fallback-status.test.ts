import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { directPrebuilt } from '../../drivers/embedded/load-llama.js';
import { prebuiltCpuBackends } from '../../drivers/llama-build/addon-paths.js';
import { prebuiltCopy } from '../helpers/faulty-variant.js';
import { swarm, tempDir } from '../helpers/cli.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';

/**
 * `swarm up --engine per-worker` on a CPU where ggml's best CPU variant faults (a library that raises
 * SIGILL as ggml initialises it, in a copy of node-llama-cpp's prebuilt addon folder): the swarm comes
 * up, every task runs once, and `swarm status` says which variant was skipped and why.
 */
t.test('per-worker engines after a SIGILL: up is ready, tasks run once, status names the fallback', async (t) => {
  const real = prebuiltCpuBackends()?.dir;
  if (missingPrereq(t, !fs.existsSync(STORIES) ? { missing: `test model ${STORIES} not found` } : !real || !directPrebuilt() ? { missing: 'node-llama-cpp\'s prebuilt addon is not loaded directly here' } : {})) return;
  const dir = tempDir(t);
  const log = path.join(dir, 'faults');
  const addon = prebuiltCopy(dir, real!, { log });
  if (!addon) { missingPrereq(t, { missing: 'gcc could not build the faulty variant' }); return; }
  const env = { SWARM_TEST_EMBEDDED_ADDON: addon, XDG_CACHE_HOME: path.join(dir, 'cache') };
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state], { env }); });

  const up = swarm(['up', '--agents', '2', '--engine', 'per-worker', '--detach', '--json', '--model', STORIES, '--state-dir', state], { env, timeoutMs: 120_000 });
  t.equal(up.code, 0, `up is ready: ${up.stdout}${up.stderr}`);
  t.ok(fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length >= 1, 'the faulty variant did run');

  const N = 4;
  const ids: string[] = [];
  for (let i = 0; i < N; i++) {
    const r = swarm(['submit', `Once upon a time ${i}`, '--max-tokens', '8', '--wait', '--json', '--timeout', '60000', '--state-dir', state], { env, timeoutMs: 90_000 });
    const res = JSON.parse(r.stdout) as { tasks: { id?: string; task_id?: string; state: string; attempts?: number }[] };
    t.equal(res.tasks.length, 1);
    t.equal(res.tasks[0]!.state, 'done', `task ${i} done: ${r.stdout.slice(0, 300)}`);
    t.equal(res.tasks[0]!.attempts, 1, 'run once: the SIGILL cost no attempt');
    ids.push(res.tasks[0]!.id ?? res.tasks[0]!.task_id ?? '');
  }
  const sj = JSON.parse(swarm(['status', '--json', '--state-dir', state], { env }).stdout);
  t.same(sj.tasks, { ...sj.tasks, queued: 0, leased: 0, done: N, failed: 0 }, 'lost 0: every task done, none left queued or leased');
  t.equal(new Set(ids).size, N, 'duplicated 0: one task each');
  t.match(sj.engine.fallbacks, [{ note: /^prebuilt addon, CPU variant\(s\) sapphirerapids hidden \(killed by SIGILL on this CPU: prebuilt addon\)$/, workers: 2 }]);
  t.ok(sj.workers.every((w: { engine_fallback?: string }) => /sapphirerapids hidden/.test(w.engine_fallback ?? '')), 'each worker reports it');
  const st = swarm(['status', '--state-dir', state], { env });
  t.match(st.stdout, /engine +per-worker\n +fallback on 2 worker\(s\): prebuilt addon, CPU variant\(s\) sapphirerapids hidden \(killed by SIGILL on this CPU: prebuilt addon\)/);
});
