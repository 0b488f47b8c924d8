import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { SwarmError } from '../../protocol/index.js';
import { requireTools, run, type BuildProgress } from './build.js';
import { bundleKey } from './paths.js';
import { ADDON_EXTRAS, patchAddonContext, patchAddonContextHeader } from './addon-patch.js';
import { ADDON_FILE, addonCmakeFlags, defaultAddonDir, nlcDir, nlcVersion, prebuiltCpuBackends, readAddonDir, type AddonBuildInfo } from './addon-paths.js';

export interface AddonBuildOptions {
  /** Install directory (default: the cache entry for the installed node-llama-cpp). */
  outDir?: string;
  jobs?: number;
  force?: boolean;
  onProgress?: (p: BuildProgress) => void;
  signal?: AbortSignal;
}

export interface AddonBuildResult { dir: string; addon: string; seconds: number; cached: boolean; source: string; nlc_version: string }

/** The directory holding node's C headers (node_api.h), which cmake-js would otherwise download. */
function nodeHeaders(): string {
  const dir = join(dirname(dirname(process.execPath)), 'include', 'node');
  if (!existsSync(join(dir, 'node_api.h'))) {
    throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `node's headers are not in ${dir} (node_api.h): install node from a package or tarball that carries them (Debian: apt-get install libnode-dev)`);
  }
  return dir;
}

/** The node_modules folder that holds node-addon-api, for the `require('node-addon-api')` in the addon's CMakeLists.txt. */
function addonApiModules(nlc: string): string {
  try {
    return dirname(dirname(createRequire(join(nlc, 'package.json')).resolve('node-addon-api')));
  } catch {
    throw new SwarmError('SWARM_ERR_ENGINE_BUILD', 'node-addon-api is not installed beside node-llama-cpp (run `npm install`)');
  }
}

/** Every shared library (and the addon) under `dir`, by file name. */
function builtFiles(dir: string, out = new Map<string, string>()): Map<string, string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) { if (e.name !== 'CMakeFiles') builtFiles(p, out); }
    else if ((e.isFile() || e.isSymbolicLink()) && (/\.so(\.\d+)*$/.test(e.name) || /\.dylib$/.test(e.name) || e.name === ADDON_FILE)) out.set(e.name, p);
  }
  return out;
}

/**
 * Build node-llama-cpp's native addon from the llama.cpp source its package carries (git bundle), with
 * no network, with AddonContext patched (addon-patch.ts: a `kvUnified` option, a fused decode and
 * sample), and install it with its ggml libraries into a cache directory that the engine host loads
 * when present. Skips the build when the directory is complete (`cached: true`).
 */
export async function buildAddon(opts: AddonBuildOptions = {}): Promise<AddonBuildResult> {
  const started = Date.now();
  const nlc = nlcDir();
  if (!nlc) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', 'node-llama-cpp is not installed (run `npm install`)');
  const llamaDir = join(nlc, 'llama');
  const bundle = join(llamaDir, 'gitRelease.bundle');
  if (!existsSync(bundle)) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `llama.cpp source bundle not found at ${bundle}`);
  const source = bundleKey(bundle);
  const version = nlcVersion(nlc);
  const dir = opts.outDir ?? defaultAddonDir();
  const result = (cached: boolean): AddonBuildResult => ({
    dir, addon: join(dir, ADDON_FILE), seconds: Math.round((Date.now() - started) / 100) / 10, cached, source, nlc_version: version,
  });
  if (!opts.force && readAddonDir(dir)) return result(true);

  requireTools();
  const include = nodeHeaders();
  const modules = addonApiModules(nlc);
  const progress = opts.onProgress ?? (() => {});
  // A folder that outlives an interrupted build (the compile takes 15-60 min on 2 cores): the next
  // run goes on from where it stopped; --force starts afresh. Removed once the addon is installed.
  const work = `${dir}.build`;
  if (opts.force) rmSync(work, { recursive: true, force: true });
  const prepared = join(work, '.prepared');
  let done = false;
  try {
    if (!existsSync(prepared)) await prepare(work, llamaDir, bundle, progress, opts.signal);
    progress({ phase: 'configure' });
    const build = join(work, 'build');
    // ggml's CPU backends (a library per CPU variant, 14 on x86-64) are most of the compile: about an
    // hour on 2 busy cores. They are plain ggml backends loaded at run time and the patch does not touch
    // them, so where node-llama-cpp ships them for this platform and version, those are used.
    const cpu = prebuiltCpuBackends(nlc);
    const flags = addonCmakeFlags(cpu !== undefined);
    await run('cmake', ['-S', work, '-B', build, ...flags, `-DCMAKE_JS_INC=${include}`], work,
      (line) => progress({ phase: 'configure', line }), opts.signal, { NODE_PATH: modules });

    progress({ phase: 'compile', percent: 0 });
    await run('cmake', ['--build', build, '--config', 'Release', '-j', String(opts.jobs ?? 2)], work, (line) => {
      const m = /^\[\s*(\d+)%\]/.exec(line);
      progress({ phase: 'compile', line, ...(m?.[1] ? { percent: Number(m[1]) } : {}) });
    }, opts.signal, { NODE_PATH: modules });

    progress({ phase: 'install' });
    installAddon(build, dir, {
      nlc_version: version, source, release: readRelease(llamaDir), flags, options: ADDON_EXTRAS, cpu_backends: cpu ? 'prebuilt' : 'built',
      built_at: new Date().toISOString(),
    }, cpu);
    done = true;
    return result(false);
  } finally {
    if (done) rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The addon's own CMake project (CMakeLists.txt, addon/, cmake/) with llama.cpp cloned beside it, as
 * node-llama-cpp's `source build` lays it out, but in a folder of ours: node_modules stays untouched.
 */
async function prepare(work: string, llamaDir: string, bundle: string, progress: (p: BuildProgress) => void, signal?: AbortSignal): Promise<void> {
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  progress({ phase: 'clone' });
  for (const name of ['CMakeLists.txt', 'addon', 'cmake', 'profiles', 'toolchains']) {
    if (existsSync(join(llamaDir, name))) cpSync(join(llamaDir, name), join(work, name), { recursive: true });
  }
  const src = join(work, 'llama.cpp');
  await run('git', ['clone', '--quiet', bundle, src], work, () => {}, signal);
  // node-llama-cpp's own fixes to llama.cpp, where they still apply (a patch already upstream does not).
  const patches = join(llamaDir, 'patches');
  if (existsSync(patches)) {
    for (const p of readdirSync(patches).filter((n) => n.endsWith('.diff'))) {
      try {
        await run('git', ['apply', '--check', '--ignore-whitespace', join(patches, p)], src, () => {}, signal);
        await run('git', ['apply', '--ignore-whitespace', join(patches, p)], src, () => {}, signal);
        progress({ phase: 'clone', line: `applied ${p}` });
      } catch { progress({ phase: 'clone', line: `${p} does not apply (already in the source): skipped` }); }
    }
  }
  const ctxFile = join(work, 'addon', 'AddonContext.cpp');
  writeFileSync(ctxFile, patchAddonContext(readFileSync(ctxFile, 'utf8')));
  const headerFile = join(work, 'addon', 'AddonContext.h');
  writeFileSync(headerFile, patchAddonContextHeader(readFileSync(headerFile, 'utf8')));
  writeFileSync(join(work, '.prepared'), new Date().toISOString() + '\n');
}

/**
 * Copy the addon and its libraries from the build folder `build` (and ggml's CPU backends from `cpu`)
 * into `dir`, through a fresh folder renamed into place: a reader sees all of it or none.
 */
export function installAddon(build: string, dir: string, info: AddonBuildInfo, cpu?: { dir: string; files: string[] }): void {
  const files = builtFiles(build);
  if (!files.has(ADDON_FILE)) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `the build produced no ${ADDON_FILE} (looked under ${build})`);
  for (const name of cpu?.files ?? []) files.set(name, join(cpu!.dir, name));
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  for (const [name, from] of files) copyFileSync(from, join(tmp, name));
  writeFileSync(join(tmp, 'BUILD_INFO.json'), JSON.stringify({ ...info, files: [...files.keys()].sort() }, null, 2) + '\n');
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
}

function readRelease(llamaDir: string): string {
  try { return (JSON.parse(readFileSync(join(llamaDir, 'llama.cpp.info.json'), 'utf8')) as { tag?: string }).tag ?? 'unknown'; } catch { return 'unknown'; }
}
