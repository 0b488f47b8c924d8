import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { findSelfBuiltAddon, readAddonDir } from '../../drivers/llama-build/addon-paths.js';
import { addonChoice, hiddenVariants, nextAddonChoice, rememberedAddonChoice, selfBuiltLadder } from '../../drivers/llama-build/addon-variant.js';
import { cpuKey } from '../../drivers/llama-build/cpu-variant.js';
import { batchedAgents, engineLog } from '../helpers/batched.js';
import { swarm, tempDir } from '../helpers/cli.js';
import { STORIES, collect, missingPrereq } from '../helpers/llama.js';

/**
 * The batched engine on the self-built addon, on a CPU where ggml's best CPU variant faults: the engine
 * dies of SIGILL once, the variant is hidden from then on, and the next engine runs the tasks.
 */

function withEnv(t: { teardown(fn: () => void): void }, key: string, value: string): void {
  const old = process.env[key];
  process.env[key] = value;
  t.teardown(() => { if (old === undefined) delete process.env[key]; else process.env[key] = old; });
}

/** A CPU variant that scores above every real one and dies of SIGILL as ggml initialises it. */
const FAULTY = `#include <signal.h>
#include <stdio.h>
int ggml_backend_score(void) { return 1 << 30; }
void *ggml_backend_init(void) { FILE *f = fopen(LOG, "a"); if (f) { fputs("sigill\\n", f); fclose(f); } raise(SIGILL); return 0; }
`;

/** The self-built addon's files linked into `dir`, its top variant replaced by one that faults. */
function faultyAddon(dir: string, real: string, log: string): string | undefined {
  const src = path.join(dir, 'faulty.c');
  fs.writeFileSync(src, FAULTY);
  const addon = path.join(dir, 'addon');
  fs.mkdirSync(addon);
  const out = spawnSync('gcc', ['-shared', '-fPIC', `-DLOG=${JSON.stringify(log)}`, '-o', path.join(addon, 'libggml-cpu-sapphirerapids.so'), src], { encoding: 'utf8' });
  if (out.status !== 0) return undefined;
  for (const n of fs.readdirSync(real)) if (!n.startsWith('.') && n !== 'libggml-cpu-sapphirerapids.so') fs.symlinkSync(path.join(real, n), path.join(addon, n));
  return addon;
}

const prereq = (): { real: string } | { missing: string } => {
  if (!fs.existsSync(STORIES)) return { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };
  const own = findSelfBuiltAddon();
  if (!own) return { missing: 'no self-built addon (`swarm engine build --addon`)' };
  if (spawnSync('gcc', ['--version']).status !== 0) return { missing: 'gcc not found' };
  return { real: own.dir };
};

t.test('an engine killed by SIGILL in a CPU variant: the variant is hidden and the next engine runs the task', async (t) => {
  const p = prereq();
  if (missingPrereq(t, p)) return;
  const tmp = tempDir(t);
  const log = path.join(tmp, 'faults');
  const addon = faultyAddon(tmp, p.real, log);
  if (!addon) { missingPrereq(t, { missing: 'gcc could not build the faulty variant' }); return; }
  withEnv(t, 'SWARM_ADDON', addon);
  const dir = tempDir(t);
  // The first start meets the faulty variant; the worker's start fails with ENGINE_START (the hub
  // would hand the task on without using an attempt), and the next start runs without it.
  await t.rejects(batchedAgents(t, STORIES, dir, 1), { code: 'SWARM_ERR_ENGINE_START', message: /killed by SIGILL/ });
  const [d] = await batchedAgents(t, STORIES, dir, 1);
  const r = await collect(d!.chat('Once upon a time', { maxTokens: 16, temperature: 0, seed: 1 }));
  t.ok(r.text.trim().length > 0, `the task completes: ${JSON.stringify(r.text)}`);
  t.equal(fs.readFileSync(log, 'utf8'), 'sigill\n', 'the faulty variant ran once');
  const own = selfBuiltLadder(readAddonDir(addon)!);
  t.same(addonChoice(own), { kind: 'self-built', skip: 1 }, 'remembered: the self-built addon without its top variant');
  t.match(rememberedAddonChoice(own)?.died, ['self-built addon']);
  const text = engineLog(dir);
  t.match(text, /killed by SIGILL with the self-built addon; next: self-built addon, CPU variant\(s\) sapphirerapids hidden/);
  t.match(text, /after SIGILL on this CPU, loading the self-built addon, CPU variant\(s\) sapphirerapids hidden/);
  t.match(text, /KV cache \w+ \(self-built binding\)/, 'still the self-built binding');
  const info = fs.readdirSync(path.join(dir, 'engines')).filter((n) => n.endsWith('.json')).map((n) => JSON.parse(fs.readFileSync(path.join(dir, 'engines', n), 'utf8')) as { binding: string });
  t.match(info.map((i) => i.binding), ['self-built; after SIGILL on this CPU: self-built addon, CPU variant(s) sapphirerapids hidden'], 'the engine\'s info file (status, passport) says so');
  t.match(swarm(['engine', 'which'], { env: { SWARM_ADDON: addon } }).stdout, /addon choice\s+self-built addon, CPU variant\(s\) sapphirerapids hidden \(killed by SIGILL on this CPU: self-built addon\)/, 'swarm engine which says so');

  await t.test('a later engine goes straight to the remembered choice', async (t) => {
    await d!.stop();
    const dir2 = tempDir(t);
    const [d2] = await batchedAgents(t, STORIES, dir2, 1);
    t.ok((await collect(d2!.chat('Lily', { maxTokens: 8 }))).text.length > 0);
    t.equal(fs.readFileSync(log, 'utf8'), 'sigill\n', 'not run again');
  });
});

t.test('when every variant of the self-built addon died, the prebuilt addon runs', async (t) => {
  const p = prereq();
  if (missingPrereq(t, p)) return;
  const tmp = tempDir(t);
  const addon = faultyAddon(tmp, p.real, path.join(tmp, 'faults'));
  if (!addon) { missingPrereq(t, { missing: 'gcc could not build the faulty variant' }); return; }
  const own = selfBuiltLadder(readAddonDir(addon)!);
  const variants = fs.readdirSync(addon).filter((n) => /^libggml-cpu-.+\.so$/.test(n)).length;
  t.same(nextAddonChoice(own, { kind: 'self-built', skip: 0, variant: 'sapphirerapids' }), { kind: 'self-built', skip: 1 });
  t.same(nextAddonChoice(own, { kind: 'self-built', skip: 2, variant: 'sapphirerapids' }), { kind: 'self-built', skip: 3 }, 'never back up');
  t.same(nextAddonChoice(own, { kind: 'self-built', skip: variants - 1 }), { kind: 'prebuilt', skip: 0 }, 'the last self-built variant died: the prebuilt addon');
  t.same(nextAddonChoice(own, { kind: 'prebuilt', skip: 0, variant: 'x64' }).kind, 'none', 'the prebuilt addon\'s baseline died: nothing left');
  t.equal(hiddenVariants(own, { kind: 'self-built', skip: 1000 }).length, variants - 1, 'a choice file past the variants (damaged) still leaves one');
  fs.mkdirSync(path.join(addon, '.cpu-variants'), { recursive: true });
  fs.writeFileSync(path.join(addon, '.cpu-variants', 'addon-choice.json'), JSON.stringify({ cpu: cpuKey(), kind: 'prebuilt', skip: 0, died: ['self-built addon'] }));
  withEnv(t, 'SWARM_ADDON', addon);
  const dir = tempDir(t);
  const [d] = await batchedAgents(t, STORIES, dir, 1);
  t.ok((await collect(d!.chat('Once upon a time', { maxTokens: 8 }))).text.length > 0);
  const text = engineLog(dir);
  t.match(text, /after SIGILL on this CPU, loading the prebuilt addon/);
  t.match(text, /\((prebuilt-direct|getLlama) binding\)/);
  t.notOk(fs.existsSync(path.join(tmp, 'faults')), 'the self-built addon was not loaded');
});
