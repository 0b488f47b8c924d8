import fs from 'node:fs';
import t, { type Test } from 'tap';
import { findSelfBuiltAddon } from '../../drivers/llama-build/addon-paths.js';
import { batchedAgents, engineLog } from '../helpers/batched.js';
import { tempDir } from '../helpers/cli.js';
import { STORIES, collect, missingPrereq } from '../helpers/llama.js';

/**
 * The batched engine loads the addon of `swarm engine build --addon` when it is there (and then runs one
 * unified KV cache for all its sequences), and node-llama-cpp's prebuilt addon when it is not.
 */

const model = fs.existsSync(STORIES) ? { model: STORIES } : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };

/** Set env `key` for the test (the engine host, started detached, inherits it). */
function withEnv(t: { teardown(fn: () => void): void }, key: string, value: string): void {
  const old = process.env[key];
  process.env[key] = value;
  t.teardown(() => { if (old === undefined) delete process.env[key]; else process.env[key] = old; });
}

/** `n` batched agents started on one engine in `dir` (agent i on sequence i), stopped with the test. */
const agents = (t: Test, dir: string, n: number, extra: Record<string, string>) => batchedAgents(t, STORIES, dir, n, extra);

/** `n` batched agents on a fresh engine in `dir`, agent i on sequence i; the last one chats at temperature 0. */
async function greedyOnLast(t: Test, dir: string, n: number, extra: Record<string, string>): Promise<string> {
  const ds = await agents(t, dir, n, extra);
  // Two sequences far apart, so a unified cache really holds two sequences' cells side by side.
  const [a, b] = await Promise.all([
    collect(ds[0]!.chat('Lily and Tom went to the park', { maxTokens: 24, temperature: 0, seed: 7 })),
    collect(ds[n - 1]!.chat('Once upon a time', { maxTokens: 32, temperature: 0, seed: 7 })),
  ]);
  t.ok(a.text.length > 0);
  return b.text;
}

/**
 * Prefix sharing: the last agent, holding a story of its own, asks after a long text the first agent
 * evaluated, so it starts from a copy of the first agent's cells (llama_memory_seq_cp).
 */
async function sharedPrefix(t: Test, dir: string, n: number, extra: Record<string, string>): Promise<{ text: string; cached: number }> {
  const ds = await agents(t, dir, n, extra);
  const doc = 'Once upon a time there was a little girl named Lily who lived in a small house by the sea. Every morning she walked to the beach with her dog Max and looked for shells in the sand.';
  await collect(ds[n - 1]!.chat('Tom had a big red ball and a small blue car.', { maxTokens: 8, temperature: 0 }));
  await collect(ds[0]!.chat(`${doc} One day`, { maxTokens: 8, temperature: 0 }));
  const r = await collect(ds[n - 1]!.chat(`${doc} Then Lily`, { maxTokens: 24, temperature: 0 }));
  return { text: r.text, cached: (r.stats as { tokensCached: number }).tokensCached };
}

t.test('with the self-built addon, a unified KV cache generates the same text as a stream per sequence', async (t) => {
  if (missingPrereq(t, model)) return;
  const own = findSelfBuiltAddon();
  if (!own && missingPrereq(t, { missing: 'no self-built addon (`swarm engine build --addon` builds one; .ci/run does)' })) return;
  const on = tempDir(t);
  const off = tempDir(t);
  // stories260K is so small that `auto` keeps a stream per sequence (kv-layout.ts): the unified cache asked for.
  const unified = await greedyOnLast(t, on, 4, { kv_unified: '1' });
  const streams = await greedyOnLast(t, off, 4, { kv_unified: '0' });
  t.match(engineLog(on), /KV cache unified \(self-built binding\)/, 'the engine runs one unified KV cache');
  t.match(engineLog(off), /KV cache per sequence \(self-built binding\)/, 'kv_unified=0 keeps a stream per sequence');
  t.ok(unified.trim().length > 0, `it generates: ${JSON.stringify(unified)}`);
  t.equal(unified, streams, 'the same text either way');

  const sharedOn = await sharedPrefix(t, tempDir(t), 4, { kv_unified: '1' });
  const sharedOff = await sharedPrefix(t, tempDir(t), 4, { kv_unified: '0' });
  t.ok(sharedOn.cached > 32 && sharedOff.cached > 32, `the prefix was copied from another sequence (${sharedOn.cached}, ${sharedOff.cached} tokens)`);
  t.equal(sharedOn.text, sharedOff.text, 'a prompt started from a copied prefix reads the same either way');
  const whole = await sharedPrefix(t, tempDir(t), 4, { prefix_cache: '0' });
  t.equal(sharedOn.text, whole.text, 'and the same as the prompt evaluated whole');
});

t.test('with no self-built addon, the engine loads the prebuilt one without an error', async (t) => {
  if (missingPrereq(t, model)) return;
  withEnv(t, 'XDG_CACHE_HOME', tempDir(t)); // an empty cache: no build there
  const dir = tempDir(t);
  const text = await greedyOnLast(t, dir, 2, {});
  t.ok(text.trim().length > 0, `it generates: ${JSON.stringify(text)}`);
  const log = engineLog(dir);
  t.match(log, /KV cache per sequence \((prebuilt-direct|getLlama) binding\)/, 'the prebuilt binding, a stream per sequence');
  t.notMatch(log, /did not load/);
});

t.test('a self-built addon that does not load falls back to the prebuilt one', async (t) => {
  if (missingPrereq(t, model)) return;
  const broken = t.testdir({ 'llama-addon.node': 'not a shared object', 'BUILD_INFO.json': JSON.stringify({ nlc_version: '0', source: 'x', release: 'x', flags: [], options: [], built_at: '', cpu_backends: 'built' }) });
  withEnv(t, 'SWARM_ADDON', broken);
  const dir = tempDir(t);
  const text = await greedyOnLast(t, dir, 2, {});
  t.ok(text.trim().length > 0, `it generates: ${JSON.stringify(text)}`);
  const log = engineLog(dir);
  t.match(log, /self-built addon .* did not load/, 'the log says why');
  t.match(log, /KV cache per sequence \((prebuilt-direct|getLlama) binding\)/);
});
