import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { findSelfBuiltAddon, nlcDir } from '../../drivers/llama-build/addon-paths.js';
import { patchAddonContext, patchAddonContextHeader } from '../../drivers/llama-build/addon-patch.js';
import { batchedAgents, engineLog } from '../helpers/batched.js';
import { tempDir } from '../helpers/cli.js';
import { fixtureNodeArgs } from '../helpers/paths.js';
import { STORIES, collect, missingPrereq } from '../helpers/llama.js';

/**
 * The self-built addon decodes on a threadpool that outlives the steps: as shipped, ggml made (and
 * joined) a pool's threads for every graph, so each step of a two-thread engine started a thread.
 */

t.test('the patch makes the pool in setThreads and frees it after the context, once', async (t) => {
  const dir = path.join(nlcDir()!, 'llama', 'addon');
  const cpp = patchAddonContext(fs.readFileSync(path.join(dir, 'AddonContext.cpp'), 'utf8'));
  const h = patchAddonContextHeader(fs.readFileSync(path.join(dir, 'AddonContext.h'), 'utf8'));
  t.match(h, /std::vector<std::pair<int32_t, ggml_threadpool_t>> swarmThreadpools;/);
  t.match(cpp, /llama_set_n_threads\(ctx, resolvedThreads, resolvedThreads\);\n {4}\}\n {4}swarmAttachThreadpool\(resolvedThreads\);/, 'made where the count is set');
  t.match(cpp, /context->contextLoaded = context->ctx != nullptr;\n\s+if \(context->contextLoaded\) \{\n\s+context->swarmAttachThreadpool\(context->context_params\.n_threads\);/, 'and with the context');
  t.match(cpp, /llama_free\(currentCtx\);\n\s+for \(auto& pool : swarmThreadpools\)/, 'freed after the context');
  t.equal(cpp.split('void AddonContext::swarmAttachThreadpool(').length, 2, 'defined once');
  t.equal(patchAddonContext(cpp), cpp, 'patching twice changes nothing');
  t.equal(patchAddonContextHeader(h), h);
});

t.test('a two-thread engine of the self-built addon starts no thread per decode step', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const own = findSelfBuiltAddon();
  if (!own && missingPrereq(t, { missing: 'no self-built addon (`swarm engine build --addon` builds one; .ci/run does)' })) return;
  if (!own!.info.options.includes('threadpool') && missingPrereq(t, { missing: 'the self-built addon predates the threadpool patch (rebuild with `swarm engine build --addon`)' })) return;
  const dir = tempDir(t);
  const ds = await batchedAgents(t, STORIES, dir, 4, { threads: '2' });
  const pid = ds[0]!.enginePid()!;
  const tids = (): string[] => { try { return fs.readdirSync(`/proc/${pid}/task`); } catch { return []; } };
  const before = new Set(tids());
  const seen = new Set(before);
  // Thread ids seen while the agents generate, sampled every millisecond or so (a step of this tiny
  // model takes about as long): a pool made per step shows up as new ids at about one a step.
  let sampling = true;
  const sampler = (async () => { while (sampling) { for (const id of tids()) seen.add(id); await new Promise((r) => setTimeout(r, 1)); } })();
  const runs = await Promise.all(ds.map((d, i) => collect(d.chat(`Once upon a time ${i}`, { maxTokens: 120, temperature: 0, seed: i }))));
  sampling = false;
  await sampler;
  const tokens = runs.reduce((a, r) => a + r.text.length, 0);
  t.ok(tokens > 0, 'the agents generated');
  const steps = Number(/(\d+) steps/.exec(engineLog(dir))?.[1] ?? NaN);
  const fresh = [...seen].filter((id) => !before.has(id)).length;
  t.ok(fresh <= 4, `${fresh} threads started while the agents generated${Number.isFinite(steps) ? ` (${steps} steps so far)` : ''}: the pool's one worker, not one a step`);
});

t.test('changing the thread count between decodes, back and forth, keeps every pool it switched away from', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const own = findSelfBuiltAddon();
  if (!own && missingPrereq(t, { missing: 'no self-built addon (`swarm engine build --addon` builds one; .ci/run does)' })) return;
  // ggml pauses the pool it ran last when a graph runs on another: a pool freed at the switch was used
  // after it was freed (the engine died of an assertion in pthread_mutex_lock when the tuner probed).
  const r = spawnSync(process.execPath, [...fixtureNodeArgs('threadpool-switch.ts'), STORIES, '60'], { encoding: 'utf8', timeout: 120_000 });
  t.equal(r.status, 0, `the process exits cleanly (signal ${r.signal ?? 'none'}): ${r.stderr.slice(-400)}`);
  t.notMatch(r.stderr, /Assertion|double free|corrupted/, 'no assertion or heap corruption');
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as { tokens?: number; binding?: string };
  t.equal(out.tokens, 60, 'all 60 decodes ran');
  t.equal(out.binding, 'self-built');
});
