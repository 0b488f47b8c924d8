/**
 * Where a self-built node-llama-cpp addon lives, and whether there is one. Kept apart from the build:
 * the engine host reads this before it loads any binding, and must not pull in the build code.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { bundleKey } from './paths.js';
import { ADDON_PATCH_ID } from './addon-patch.js';

/** The addon's file name inside its directory (as node-llama-cpp names it). */
export const ADDON_FILE = 'llama-addon.node';

/** What `swarm engine build --addon` writes beside the addon. */
export interface AddonBuildInfo {
  /** node-llama-cpp's version whose addon source was built. */
  nlc_version: string;
  /** The llama.cpp commit (first 12 hex digits) of the bundle. */
  source: string;
  /** The llama.cpp release node-llama-cpp names (llama.cpp.info.json). */
  release: string;
  flags: string[];
  /** The options the patched addon reads beyond node-llama-cpp's own. */
  options: string[];
  /** `prebuilt`: ggml's CPU backends are node-llama-cpp's own of the same release; `built`: compiled here. */
  cpu_backends: 'prebuilt' | 'built';
  built_at: string;
}

/** node-llama-cpp's package directory, or undefined when it is not installed. */
export function nlcDir(): string | undefined {
  try {
    return dirname(dirname(createRequire(import.meta.url).resolve('node-llama-cpp')));
  } catch { return undefined; }
}

/** node-llama-cpp's version, read from its package.json. */
export function nlcVersion(dir = nlcDir()): string {
  if (!dir) throw new Error('node-llama-cpp is not installed');
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

/** node-llama-cpp's name for a platform (`linux-x64`, `mac-arm64`). */
export function nlcPlatform(arch = process.arch, platform = process.platform): string {
  return `${platform === 'darwin' ? 'mac' : platform === 'win32' ? 'win' : platform}-${arch}`;
}

/**
 * The folder of node-llama-cpp's prebuilt CPU binaries for this platform when it holds ggml's CPU
 * backends as libraries of their own (libggml-cpu-<variant>.so) of the same version, else undefined.
 */
export function prebuiltCpuBackends(dir = nlcDir()): { dir: string; files: string[] } | undefined {
  if (!dir) return undefined;
  const folder = nlcPlatform();
  try {
    const pkg = dirname(dirname(createRequire(join(dir, 'package.json')).resolve(`@node-llama-cpp/${folder}`)));
    if ((JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version?: string }).version !== nlcVersion(dir)) return undefined;
    const bins = join(pkg, 'bins', folder);
    const files = readdirSync(bins).filter((n) => /^(lib)?ggml-cpu[-.\w]*\.(so|dylib|dll)$/.test(n));
    return files.length > 0 ? { dir: bins, files } : undefined;
  } catch { return undefined; }
}

/**
 * The CMake flags of the addon build, as node-llama-cpp's own CI builds its CPU binaries for this
 * platform. With `cpuPrebuilt`, ggml's CPU backends are not compiled (GGML_CPU=OFF): the addon takes
 * node-llama-cpp's prebuilt ones of the same llama.cpp release, loaded at run time beside it.
 */
export function addonCmakeFlags(cpuPrebuilt: boolean, arch = process.arch, platform = process.platform): string[] {
  const plat = nlcPlatform(arch, platform);
  const flags = [
    '-DCMAKE_BUILD_TYPE=Release',
    // No -march=native: every CPU variant of ggml's CPU backend as a library of its own, the best of
    // which is loaded at run time (as node-llama-cpp's prebuilt addon does), so a cache copied to
    // another machine, or an image built on one CPU, still runs.
    '-DGGML_NATIVE=OFF',
    '-DGGML_BACKEND_DL=ON',
    ...(cpuPrebuilt ? ['-DGGML_CPU=OFF', '-DGGML_CPU_ALL_VARIANTS=OFF']
      : platform === 'linux' && (arch === 'x64' || arch === 'arm64') ? ['-DGGML_CPU_ALL_VARIANTS=ON'] : []),
    '-DGGML_METAL=OFF',
    '-DGGML_OPENMP=OFF',
    '-DGGML_CCACHE=OFF',
    '-DGGML_BUILD_NUMBER=1',
    '-DLLAMA_CURL=OFF',
    '-DLLAMA_HTTPLIB=OFF',
    '-DLLAMA_BUILD_BORINGSSL=OFF',
    '-DLLAMA_OPENSSL=OFF',
    `-DNLC_CURRENT_PLATFORM=${plat}`,
    `-DNLC_TARGET_PLATFORM=${plat}`,
    // Library names of their own (libllama.swarm.so): never taken for the prebuilt ones.
    '-DNLC_VARIANT=swarm',
  ];
  return flags;
}

/** The cache entry's name: the package version, the llama.cpp source, the platform and the patch. */
export function addonKey(): string {
  const h = createHash('sha256').update(ADDON_PATCH_ID).digest('hex').slice(0, 8);
  const dir = nlcDir();
  return `${nlcVersion(dir)}-${bundleKey(join(dir!, 'llama', 'gitRelease.bundle'))}-${process.platform}-${process.arch}-${h}`;
}

/** Root of the addon cache: $XDG_CACHE_HOME/swarm/node-llama-cpp (default ~/.cache/swarm/node-llama-cpp). */
export function addonCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME.startsWith('/') ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(base, 'swarm', 'node-llama-cpp');
}

/** The directory `swarm engine build --addon` installs into for the installed node-llama-cpp. */
export function defaultAddonDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(addonCacheRoot(env), addonKey());
}

/** A self-built addon: its file, its directory (the ggml libraries sit beside it), and how it was built. */
export interface SelfBuiltAddon { dir: string; addon: string; info: AddonBuildInfo }

/** The addon in `dir` when it is complete (BUILD_INFO.json is written last), else undefined. */
export function readAddonDir(dir: string): SelfBuiltAddon | undefined {
  const addon = join(dir, ADDON_FILE);
  const infoFile = join(dir, 'BUILD_INFO.json');
  if (!existsSync(addon) || !existsSync(infoFile)) return undefined;
  try {
    return { dir, addon, info: JSON.parse(readFileSync(infoFile, 'utf8')) as AddonBuildInfo };
  } catch { return undefined; }
}

/**
 * The self-built addon the engine loads, or undefined for node-llama-cpp's prebuilt one. SWARM_ADDON
 * decides first: `prebuilt` never takes a self-built one, a directory takes the addon there; otherwise
 * the cache entry for the installed node-llama-cpp and llama.cpp source, when it was built.
 */
export function findSelfBuiltAddon(env: NodeJS.ProcessEnv = process.env): SelfBuiltAddon | undefined {
  const want = env.SWARM_ADDON;
  if (want === 'prebuilt') return undefined;
  if (want && want.startsWith('/')) return readAddonDir(want);
  try { return readAddonDir(defaultAddonDir(env)); } catch { return undefined; }
}
