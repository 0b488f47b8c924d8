import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { EmbeddedDriver } from '../../drivers/embedded/index.js';
import { directPrebuilt } from '../../drivers/embedded/load-llama.js';
import { prebuiltCpuBackends } from '../../drivers/llama-build/addon-paths.js';
import { addonChoice, fallbackNote, prebuiltLadder, rememberedAddonChoice } from '../../drivers/llama-build/addon-variant.js';
import { cpuVariants } from '../../drivers/llama-build/cpu-variant.js';
import { batchedAgents, engineLog } from '../helpers/batched.js';
import { describeEngines, runningEngines } from '../../drivers/batched/engine-info.js';
import { swarm, tempDir } from '../helpers/cli.js';
import { STORIES, collect, missingPrereq } from '../helpers/llama.js';
import { prebuiltCopy } from '../helpers/faulty-variant.js';

/**
 * Engines on node-llama-cpp's prebuilt addon (the per-worker engine always, the batched one without a
 * self-built addon) on a CPU where one of ggml's CPU variants faults: the engine dies of SIGILL once,
 * that variant is hidden from then on (state in the addon cache, never in node_modules), and the task
 * runs on the next one. Before, the per-worker engine died at each start and the task went from
 * worker to worker without end.
 */

function withEnv(t: { teardown(fn: () => void): void }, key: string, value: string): void {
  const old = process.env[key];
  process.env[key] = value;
  t.teardown(() => { if (old === undefined) delete process.env[key]; else process.env[key] = old; });
}

const prereq = (gcc: boolean): { real: string } | { missing: string } => {
  if (!fs.existsSync(STORIES)) return { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };
  const real = prebuiltCpuBackends()?.dir;
  if (!real || !directPrebuilt()) return { missing: 'node-llama-cpp\'s prebuilt addon is not loaded directly here (getLlama() tests its binary itself)' };
  if (gcc && spawnSync('gcc', ['--version']).status !== 0) return { missing: 'gcc not found' };
  return { real };
};

/**
 * A copy of the prebuilt addon whose top CPU variant (gcc-built) dies of SIGILL as it loads, each fault
 * logged to `log`, set as the engine's binding with a cache of its own; undefined (failed or skipped) without one.
 */
function faultyAddon(t: Test): { tmp: string; log: string; addon: string } | undefined {
  const p = prereq(true);
  if (missingPrereq(t, p)) return undefined;
  const tmp = tempDir(t);
  const log = path.join(tmp, 'faults');
  const addon = prebuiltCopy(tmp, p.real, { log });
  if (!addon) { missingPrereq(t, { missing: 'gcc could not build the faulty variant' }); return undefined; }
  withEnv(t, 'SWARM_TEST_EMBEDDED_ADDON', addon);
  withEnv(t, 'XDG_CACHE_HOME', path.join(tmp, 'cache'));
  return { tmp, log, addon };
}

t.test('per-worker engine: a CPU variant killed by SIGILL as it loads is hidden, and the start succeeds on the next', async (t) => {
  const f = faultyAddon(t);
  if (!f) return;
  const { tmp, log, addon } = f;
  const d = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: {} });
  t.teardown(() => d.stop());
  await d.start();
  const r = await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
  t.ok(r.text.trim().length > 0, `the task runs: ${JSON.stringify(r.text)}`);
  t.equal(fs.readFileSync(log, 'utf8'), 'sigill\n', 'the faulty variant ran once');
  const ladder = prebuiltLadder(process.env, path.dirname(addon))!;
  t.ok(ladder.root.startsWith(path.join(tmp, 'cache')), 'the state is in the addon cache, not beside node_modules\' addon');
  t.same(addonChoice(ladder), { kind: 'prebuilt', skip: 1 }, 'remembered: the prebuilt addon without its top variant');
  t.equal(d.fallback(), 'prebuilt addon, CPU variant(s) sapphirerapids hidden (killed by SIGILL on this CPU: prebuilt addon)', 'the driver knows (status shows it)');
  t.equal(fallbackNote(ladder), 'prebuilt addon, CPU variant(s) sapphirerapids hidden (killed by SIGILL on this CPU: prebuilt addon)');
  t.match(swarm(['engine', 'which']).stdout, /prebuilt choice\s+prebuilt addon, CPU variant\(s\) sapphirerapids hidden \(killed by SIGILL on this CPU: prebuilt addon\)/, 'swarm engine which says so');

  await t.test('a later engine goes straight to the remembered choice', async (t) => {
    const d2 = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: {} });
    t.teardown(() => d2.stop());
    t.ok((await collect(d2.chat('Lily', { maxTokens: 4 }))).text.length > 0);
    t.equal(fs.readFileSync(log, 'utf8'), 'sigill\n', 'not run again');
  });
});

t.test('per-worker engine: a variant that faults at the first decode is hidden, and the chat runs again on the next without failing', async (t) => {
  const p = prereq(false);
  if (missingPrereq(t, p)) return;
  const tmp = tempDir(t);
  const addon = prebuiltCopy(tmp, p.real)!;
  withEnv(t, 'SWARM_TEST_EMBEDDED_ADDON', addon);
  withEnv(t, 'XDG_CACHE_HOME', path.join(tmp, 'cache'));
  // Which variant ggml picks on this CPU: that one faults (the host's test hook) at its first chat.
  const probe = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: {} });
  await probe.start();
  const maps = fs.readFileSync(`/proc/${probe.pids()[0]}/maps`, 'utf8');
  await probe.stop();
  const picked = /libggml-cpu-(\w+)\.so/.exec(maps)?.[1];
  const variants = cpuVariants(path.dirname(addon));
  if (!picked) { t.fail('the engine mapped no ggml CPU variant (/proc/PID/maps)'); return; }
  // A CPU whose best variant is ggml's baseline has nothing below it to fall back to: the fallback goes
  // unproven, which CI must not pass quietly (missingPrereq fails there, skips elsewhere).
  if (picked === variants[variants.length - 1] && missingPrereq(t, { missing: `ggml runs its last variant here (${picked}): nothing to fall back to, the fallback is not shown on this CPU` })) return;
  withEnv(t, 'SWARM_TEST_FAULTY_VARIANT', picked);
  const d = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: {} });
  t.teardown(() => d.stop());
  await d.start();
  const first = d.pids()[0];
  const r = await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
  t.ok(r.text.trim().length > 0, `the chat completes: ${JSON.stringify(r.text)}`);
  t.not(d.pids()[0], first, 'on a new engine');
  const rec = rememberedAddonChoice(prebuiltLadder(process.env, path.dirname(addon))!);
  t.equal(rec?.skip, variants.indexOf(picked) + 1, `${picked} and those above it hidden`);
  t.match(rec?.died, [`prebuilt addon, CPU variant ${picked}`]);
  t.match(d.fallback(), new RegExp(`hidden \\(killed by SIGILL on this CPU: prebuilt addon, CPU variant ${picked}\\)$`));
  const again = await collect(d.chat('Lily', { maxTokens: 4 }));
  t.ok(again.text.length > 0, 'and the next chat on the same engine');
});

t.test('batched engine without a self-built addon: the prebuilt addon\'s faulty variant is hidden the same way', async (t) => {
  const f = faultyAddon(t);
  if (!f) return;
  const { tmp, log, addon } = f;
  withEnv(t, 'SWARM_ADDON', 'prebuilt');
  const dir = tempDir(t);
  await t.rejects(batchedAgents(t, STORIES, dir, 1), { code: 'SWARM_ERR_ENGINE_START', message: /killed by SIGILL/ });
  const [d] = await batchedAgents(t, STORIES, dir, 1);
  t.ok((await collect(d!.chat('Once upon a time', { maxTokens: 8 }))).text.length > 0);
  t.equal(fs.readFileSync(log, 'utf8'), 'sigill\n', 'the faulty variant ran once');
  const text = engineLog(dir);
  t.match(text, /killed by SIGILL with the prebuilt addon; next: prebuilt addon, CPU variant\(s\) sapphirerapids hidden/);
  const info = fs.readdirSync(path.join(dir, 'engines')).filter((n) => n.endsWith('.json')).map((n) => JSON.parse(fs.readFileSync(path.join(dir, 'engines', n), 'utf8')) as { binding: string });
  t.match(info.map((i) => i.binding), [/after SIGILL on this CPU: prebuilt addon, CPU variant\(s\) sapphirerapids hidden/]);
  t.match(describeEngines(runningEngines(dir)), [/; fallback: prebuilt addon, CPU variant\(s\) sapphirerapids hidden \(killed by SIGILL on this CPU: prebuilt addon\)$/], 'swarm status\'s engine line says so');
});
