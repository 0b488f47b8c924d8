import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { addonCacheRoot, addonCmakeFlags, defaultAddonDir, findSelfBuiltAddon, nlcDir, prebuiltCpuBackends } from '../../drivers/llama-build/addon-paths.js';
import { patchAddonContext, patchAddonContextHeader } from '../../drivers/llama-build/addon-patch.js';

const info = JSON.stringify({ nlc_version: '3', source: 'abc', release: 'v0', flags: [], options: ['kvUnified'], built_at: '', cpu_backends: 'built' });

t.test("the patch makes node-llama-cpp's AddonContext.cpp read a kvUnified option, once", async (t) => {
  const file = path.join(nlcDir()!, 'llama', 'addon', 'AddonContext.cpp');
  const src = fs.readFileSync(file, 'utf8');
  const patched = patchAddonContext(src);
  t.match(patched, /options\.Has\("kvUnified"\)[\s\S]*context_params\.kv_unified = options\.Get\("kvUnified"\)/);
  // Read after the hard-wired default, so the option wins.
  t.ok(patched.indexOf('context_params.kv_unified = false') < patched.indexOf('options.Has("kvUnified")'));
  t.equal(patchAddonContext(patched), patched, 'patching twice changes nothing');
  t.throws(() => patchAddonContext('int main() {}'), /kv_unified/);
});

t.test('the patch adds decodeBatchAndSample to the context: declared, defined and registered, once', async (t) => {
  const dir = path.join(nlcDir()!, 'llama', 'addon');
  const cpp = patchAddonContext(fs.readFileSync(path.join(dir, 'AddonContext.cpp'), 'utf8'));
  const h = patchAddonContextHeader(fs.readFileSync(path.join(dir, 'AddonContext.h'), 'utf8'));
  t.match(h, /Napi::Value SampleToken\(const Napi::CallbackInfo& info\);\n\s+Napi::Value DecodeBatchAndSample\(const Napi::CallbackInfo& info\);/);
  t.match(cpp, /InstanceMethod\("sampleToken", &AddonContext::SampleToken\),\n\s+InstanceMethod\("decodeBatchAndSample", &AddonContext::DecodeBatchAndSample\),/);
  // Defined before node-llama-cpp's own decodeBatch, so that the worker class sits at file scope.
  t.ok(cpp.indexOf('Napi::Value AddonContext::DecodeBatchAndSample(') < cpp.indexOf('Napi::Value AddonContext::DecodeBatch(const'));
  t.equal(cpp.split('class AddonContextDecodeBatchAndSampleWorker').length, 2, 'one worker class');
  t.equal(patchAddonContextHeader(h), h, 'patching the header twice changes nothing');
  t.throws(() => patchAddonContextHeader('class AddonContext {};'), /not the one the patch was written for/);
});

t.test('the self-built addon is found in the cache entry of this node-llama-cpp, complete or not at all', async (t) => {
  const cache = t.testdir({});
  const env = { XDG_CACHE_HOME: cache };
  t.equal(addonCacheRoot(env), path.join(cache, 'swarm', 'node-llama-cpp'));
  t.equal(findSelfBuiltAddon(env), undefined, 'nothing built');
  const dir = defaultAddonDir(env);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'llama-addon.node'), 'x');
  t.equal(findSelfBuiltAddon(env), undefined, 'no BUILD_INFO.json: an unfinished install');
  fs.writeFileSync(path.join(dir, 'BUILD_INFO.json'), info);
  t.equal(findSelfBuiltAddon(env)?.addon, path.join(dir, 'llama-addon.node'));
  t.equal(findSelfBuiltAddon({ ...env, SWARM_ADDON: 'prebuilt' }), undefined, 'SWARM_ADDON=prebuilt ignores it');
});

t.test('SWARM_ADDON names an addon directory', async (t) => {
  const dir = t.testdir({ 'llama-addon.node': 'x', 'BUILD_INFO.json': info });
  t.equal(findSelfBuiltAddon({ SWARM_ADDON: dir })?.dir, dir);
  t.equal(findSelfBuiltAddon({ SWARM_ADDON: path.join(dir, 'nope') }), undefined);
});

t.test("ggml's CPU backends come from node-llama-cpp's prebuilt package when it has them, else they are compiled", async (t) => {
  const cpu = prebuiltCpuBackends();
  if (cpu) t.ok(cpu.files.every((f) => f.includes('ggml-cpu')), cpu.files.join(', '));
  t.ok(addonCmakeFlags(true).includes('-DGGML_CPU=OFF'));
  t.notOk(addonCmakeFlags(false).includes('-DGGML_CPU=OFF'));
  t.ok(addonCmakeFlags(false, 'x64', 'linux').includes('-DGGML_CPU_ALL_VARIANTS=ON'), 'every x86-64 variant, chosen at run time');
  t.notOk(addonCmakeFlags(false).some((f) => f.includes('NATIVE=ON')), 'never -march=native');
});
