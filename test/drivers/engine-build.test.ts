import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { CMAKE_FLAGS, FLAGS_KEY, LLAMA_BINARIES, buildLlama, bundleKey, bundlePath, cacheKey, defaultBinDir, findLlamaBinary } from '../../drivers/llama-build/index.js';

function fakeBinDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bin-'));
  for (const n of LLAMA_BINARIES) { fs.writeFileSync(path.join(dir, n), '#!/bin/sh\necho fake\n'); fs.chmodSync(path.join(dir, n), 0o755); }
  return dir;
}

t.test('the source bundle is found and named by its commit', async (t) => {
  t.ok(fs.existsSync(bundlePath()), bundlePath());
  t.match(bundleKey(), /^[0-9a-f]{12}$/);
  t.equal(defaultBinDir({ XDG_CACHE_HOME: '/c' }), `/c/swarm/llama.cpp/${bundleKey()}-${FLAGS_KEY}/bin`);
  t.equal(defaultBinDir({ SWARM_LLAMA_BIN_DIR: '/x' }), '/x');
});

t.test('findLlamaBinary looks in SWARM_LLAMA_BIN_DIR, then the cache, then PATH', async (t) => {
  const dir = fakeBinDir();
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-empty-'));
  t.teardown(() => { fs.rmSync(dir, { recursive: true }); fs.rmSync(empty, { recursive: true }); });
  t.equal(findLlamaBinary('llama-server', { SWARM_LLAMA_BIN_DIR: dir, XDG_CACHE_HOME: empty, PATH: '' }), path.join(dir, 'llama-server'));
  t.equal(findLlamaBinary('llama-server', { XDG_CACHE_HOME: empty, PATH: `${empty}:${dir}` }), path.join(dir, 'llama-server'));
  const cached = path.join(empty, 'swarm', 'llama.cpp', cacheKey(), 'bin');
  fs.mkdirSync(cached, { recursive: true });
  fs.copyFileSync(path.join(dir, 'llama-server'), path.join(cached, 'llama-server'));
  fs.chmodSync(path.join(cached, 'llama-server'), 0o755);
  t.equal(findLlamaBinary('llama-server', { XDG_CACHE_HOME: empty, PATH: dir }), path.join(cached, 'llama-server'), 'the cache before PATH');
  t.equal(findLlamaBinary('llama-server', { XDG_CACHE_HOME: empty + '/none', PATH: '' }), undefined);
});

t.test('a build is skipped when the binaries are there', async (t) => {
  const dir = fakeBinDir();
  t.teardown(() => fs.rmSync(dir, { recursive: true }));
  const r = await buildLlama({ outDir: dir });
  t.equal(r.cached, true);
  t.equal(r.bin_dir, dir);
  t.same(Object.keys(r.binaries).sort(), [...LLAMA_BINARIES].sort());
});

t.test('missing build tools give SWARM_ERR_ENGINE_BUILD with the apt-get hint', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-out-'));
  const oldPath = process.env.PATH;
  process.env.PATH = out; // nothing in it
  t.teardown(() => { process.env.PATH = oldPath; fs.rmSync(out, { recursive: true }); });
  await t.rejects(buildLlama({ outDir: out }), { code: 'SWARM_ERR_ENGINE_BUILD', message: /apt-get install cmake g\+\+/ });
});

t.test('a full build from source (SWARM_TEST_ENGINE_BUILD=1; about 4 minutes on 2 cores)', { skip: process.env.SWARM_TEST_ENGINE_BUILD === '1' ? false : 'set SWARM_TEST_ENGINE_BUILD=1 to build llama.cpp in the test' }, async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-build-'));
  t.teardown(() => fs.rmSync(out, { recursive: true }));
  const phases = new Set<string>();
  const r = await buildLlama({ outDir: out, onProgress: (p) => phases.add(p.phase) });
  t.equal(r.cached, false);
  t.same([...phases], ['clone', 'configure', 'compile', 'install']);
  for (const n of LLAMA_BINARIES) t.ok(fs.statSync(path.join(out, n)).mode & 0o111, `${n} is executable`);
  const again = await buildLlama({ outDir: out });
  t.equal(again.cached, true, 'the second run is a cache hit');
});

t.test('the build is portable: no -march=native, every CPU variant chosen at run time, and the cache key names the flags', async (t) => {
  t.notOk(CMAKE_FLAGS.includes('-DGGML_NATIVE=ON' as never), 'no native build');
  for (const f of ['-DGGML_NATIVE=OFF', '-DGGML_BACKEND_DL=ON', '-DGGML_CPU_ALL_VARIANTS=ON', '-DBUILD_SHARED_LIBS=ON']) t.ok(CMAKE_FLAGS.includes(f as never), f);
  t.match(cacheKey(), new RegExp(`^${bundleKey()}-[0-9a-f]{8}$`), 'a build with other flags lands in another cache entry');
});

// The binaries `swarm engine build` put in the cache (CI builds them first): the program starts,
// loads its CPU backend variant and says what it is.
t.test('the built llama-server runs', async (t) => {
  const bin = findLlamaBinary('llama-server', { ...process.env, PATH: '' });
  if (!bin) {
    if (process.env.CI === 'true') t.fail('no llama-server in the cache: `swarm engine build` first');
    else t.pass('skipped: no llama-server built (`node dist/cli/main.js engine build`)');
    return;
  }
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout + r.stderr, /version: \d+/);
  const devices = spawnSync(bin, ['--list-devices'], { encoding: 'utf8', timeout: 60_000 });
  t.equal(devices.status, 0, devices.stderr);
  t.notMatch(devices.stdout + devices.stderr, /Illegal instruction/);
});
