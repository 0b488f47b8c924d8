import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { EmbeddedDriver } from '../../drivers/embedded/index.js';
import { directPrebuilt } from '../../drivers/embedded/load-llama.js';
import { STORIES, collect, missingPrereq } from '../helpers/llama.js';

/**
 * The engine host loads node-llama-cpp's prebuilt binary without node-llama-cpp's binary test process
 * (load-llama.ts). What that skips must stay safe: a binding that fails to load, or that crashes the
 * host natively, is SWARM_ERR_ENGINE_START for the driver, never a crash of the process holding it.
 */

const model = fs.existsSync(STORIES) ? { model: STORIES } : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };

/**
 * Run `fn` with env SWARM_TEST_EMBEDDED_ADDON set (the host loads that file as its binding), and a cache
 * of its own: an engine keeps its CPU-variant record per binding folder there, and these folders are temporary.
 */
async function withAddon<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const cache = process.env.XDG_CACHE_HOME;
  process.env.SWARM_TEST_EMBEDDED_ADDON = file;
  process.env.XDG_CACHE_HOME = path.join(path.dirname(file), 'cache');
  try { return await fn(); } finally {
    delete process.env.SWARM_TEST_EMBEDDED_ADDON;
    if (cache === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = cache;
  }
}

t.test('on Linux x64 the prebuilt binary is loaded directly, without the test process', async (t) => {
  if (missingPrereq(t, model)) return;
  if (process.platform !== 'linux' || process.arch !== 'x64') { t.skip('the direct load is for Linux (x64 is what is installed here)', () => {}); return; }
  t.ok(directPrebuilt(), 'node-llama-cpp would load its own prebuilt CPU binary here');
  const d = new EmbeddedDriver({ name: 'embedded', model: model.model, options: {} });
  t.teardown(() => d.stop());
  await d.start();
  t.equal(d.loadPath, 'prebuilt-direct');
  // The batched engine's rule, not node-llama-cpp's default (on for every CPU model): heads of 8 run scalar.
  t.match(d.flashAttn, { on: false, why: /^auto: head size 8 / }, 'flash attention off, and why');
  t.comment(`engine load (ms): ${JSON.stringify(d.loadTimes)}`);
  const text = (await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }))).text;
  t.ok(text.trim().length > 0, `it generates: ${JSON.stringify(text)}`);
});

t.test('a binding that does not load is ENGINE_START naming the binding', async (t) => {
  if (missingPrereq(t, model)) return;
  if (!directPrebuilt()) { if (process.env.CI === 'true') t.fail('node-llama-cpp would not load its prebuilt binary directly here (CI installs @node-llama-cpp/linux-x64)'); else t.skip('getLlama() loads the binary here (with its own test)', () => {}); return; }
  const dir = t.testdir({ 'broken.node': 'not a shared object' });
  const d = new EmbeddedDriver({ name: 'embedded', model: model.model, options: {} });
  t.teardown(() => d.stop());
  await withAddon(path.join(dir, 'broken.node'), async () => {
    await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START', message: /llama\.cpp binding.*broken\.node/ });
  });
  t.same(d.pids(), [], 'no engine left running');
  await d.start();
  t.equal(d.pids().length, 1, 'with the real binary the same driver starts');
});

t.test('a binding that crashes the host natively is ENGINE_START, and the driver lives on', async (t) => {
  if (missingPrereq(t, model)) return;
  if (!directPrebuilt()) { if (process.env.CI === 'true') t.fail('node-llama-cpp would not load its prebuilt binary directly here (CI installs @node-llama-cpp/linux-x64)'); else t.skip('getLlama() loads the binary here (with its own test)', () => {}); return; }
  // A shared object whose constructor aborts: what a binary built for another CPU does (SIGILL) when loaded.
  const dir = t.testdir({ 'crash.c': '#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n' });
  const so = path.join(dir, 'crash.node');
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', so, path.join(dir, 'crash.c')], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0) {
    if (process.env.CI === 'true') t.fail(`cc failed: ${cc.error?.message ?? cc.stderr}`);
    else t.skip(`no C compiler: ${cc.error?.message ?? cc.stderr}`, () => {});
    return;
  }
  const d = new EmbeddedDriver({ name: 'embedded', model: model.model, options: {} });
  t.teardown(() => d.stop());
  await withAddon(so, async () => {
    await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START', message: /killed by SIGABRT before it was ready[\s\S]*loading llama\.cpp binding .*crash\.node/ });
  });
  t.same(d.pids(), [], 'no engine left running');
  await d.start();
  const text = (await collect(d.chat('Once upon a time', { maxTokens: 4, temperature: 0 }))).text;
  t.ok(text.length > 0, 'the next start, with the real binary, serves');
});
