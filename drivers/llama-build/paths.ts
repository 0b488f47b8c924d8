import { FLAGS_KEY } from './flags.js';
import { accessSync, constants, openSync, readSync, closeSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

/** The llama.cpp programs `swarm engine build` produces. */
export const LLAMA_BINARIES = ['llama-server', 'llama-cli', 'llama-completion', 'llama-bench', 'llama-quantize'] as const;
export type LlamaBinary = typeof LLAMA_BINARIES[number];

/** Path of the llama.cpp source bundle that the node-llama-cpp npm package carries. */
export function bundlePath(): string {
  // Resolve through the package's main entry: its exports map does not expose package.json.
  const main = createRequire(import.meta.url).resolve('node-llama-cpp');
  return join(dirname(dirname(main)), 'llama', 'gitRelease.bundle');
}

let keyMemo: { path: string; key: string } | undefined;

/**
 * A short name for the llama.cpp source in the bundle: the first 12 hex digits of its HEAD commit.
 * Read from the bundle header (`# v2 git bundle\n<sha> HEAD`) so that finding a binary needs no git.
 */
export function bundleKey(path = bundlePath()): string {
  if (keyMemo?.path === path) return keyMemo.key;
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(512);
  let n: number;
  try { n = readSync(fd, buf, 0, buf.length, 0); } finally { closeSync(fd); }
  const m = /^# v[23] git bundle\n(?:@[^\n]*\n)*-?([0-9a-f]{40})/.exec(buf.subarray(0, n).toString('latin1'));
  if (!m?.[1]) throw new Error(`${path} is not a git bundle`);
  keyMemo = { path, key: m[1].slice(0, 12) };
  return keyMemo.key;
}

/** Root of the binary cache: $XDG_CACHE_HOME/swarm/llama.cpp (default ~/.cache/swarm/llama.cpp). */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME.startsWith('/') ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(base, 'swarm', 'llama.cpp');
}

/** Where `swarm engine build` installs binaries by default: SWARM_LLAMA_BIN_DIR, else the cache dir for this bundle. */
export function defaultBinDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SWARM_LLAMA_BIN_DIR) return env.SWARM_LLAMA_BIN_DIR;
  return join(cacheRoot(env), cacheKey(), 'bin');
}

/** The cache directory's name: the source's commit and the build flags (a build made another way is another entry). */
export function cacheKey(): string { return `${bundleKey()}-${FLAGS_KEY}`; }

function isExecutable(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch { return false; }
}

/**
 * Find a llama.cpp program: in SWARM_LLAMA_BIN_DIR, then in the build cache for the bundled source,
 * then on PATH. Returns undefined when it is nowhere (the fix is `swarm engine build`).
 */
export function findLlamaBinary(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dirs: string[] = [];
  if (env.SWARM_LLAMA_BIN_DIR) dirs.push(env.SWARM_LLAMA_BIN_DIR);
  try { dirs.push(join(cacheRoot(env), cacheKey(), 'bin')); } catch { /* no node-llama-cpp: cache unknown */ }
  for (const d of (env.PATH ?? '').split(delimiter)) if (d) dirs.push(d);
  for (const d of dirs) {
    const p = join(d, name);
    if (isExecutable(p)) return p;
  }
  return undefined;
}

/** True when every program in `names` is an executable file in `dir`. */
export function hasBinaries(dir: string, names: readonly string[] = LLAMA_BINARIES): boolean {
  return names.every((n) => isExecutable(join(dir, n)));
}
