import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SwarmError } from '../../protocol/index.js';
import { LLAMA_BINARIES, bundleKey, bundlePath, defaultBinDir, findLlamaBinary, hasBinaries } from './paths.js';
import { runCommand } from '../run-command.js';

import { CMAKE_FLAGS } from './flags.js';

export { CMAKE_FLAGS };

/** One step of the build, for a progress line. */
export interface BuildProgress {
  phase: 'clone' | 'configure' | 'compile' | 'install';
  /** cmake's own percentage during `compile`. */
  percent?: number;
  line?: string;
}

export interface BuildOptions {
  /** Install directory (default: SWARM_LLAMA_BIN_DIR, else the cache dir for the bundled source). */
  outDir?: string;
  /** Parallel compile jobs (default 2). */
  jobs?: number;
  /** Build even when the binaries are already there. */
  force?: boolean;
  /** The git bundle with llama.cpp's source (default: the one in node-llama-cpp). */
  bundle?: string;
  onProgress?: (p: BuildProgress) => void;
  signal?: AbortSignal;
}

/** What `swarm engine build --json` prints. */
export interface BuildResult {
  bin_dir: string;
  binaries: Record<string, string>;
  seconds: number;
  cached: boolean;
  source: string;
}

const TOOL_HINT = 'install the build tools with `apt-get install cmake g++ make git` (Debian/Ubuntu)';

export function requireTools(): void {
  const missing = ['cmake', 'make', 'git'].filter((t) => !findLlamaBinary(t, { PATH: process.env.PATH }));
  if (!findLlamaBinary('c++', { PATH: process.env.PATH }) && !findLlamaBinary('g++', { PATH: process.env.PATH })) missing.push('g++');
  if (missing.length > 0) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `${missing.join(', ')} not found on PATH: ${TOOL_HINT}`);
}

/** Run a command; resolve with nothing, or reject with the tail of its output. Lines go to `onLine`. */
export async function run(cmd: string, args: string[], cwd: string, onLine: (l: string) => void, signal?: AbortSignal, env: NodeJS.ProcessEnv = {}): Promise<void> {
  const tail: string[] = [];
  // Its own process group (startCommand's default), so an abort takes make's compiler children down too.
  const r = await runCommand(cmd, args, {
    cwd, signal, killGraceMs: 0, hold: false, env: { ...process.env, ...env, LC_ALL: 'C' },
    onLine: (l) => { tail.push(l); if (tail.length > 40) tail.shift(); onLine(l); },
  });
  if (r.error) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `${cmd}: ${r.error.message}`, { cause: r.error });
  if (r.aborted) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', 'build aborted');
  if (r.exitCode !== 0) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `${cmd} ${args.slice(0, 2).join(' ')} failed (${r.signal ?? `exit ${r.exitCode}`}):\n${tail.join('\n')}`);
}

/**
 * Build llama-server, llama-cli, llama-completion, llama-bench and llama-quantize from the llama.cpp source
 * in node-llama-cpp's git bundle, with no network, and install them into a cache directory.
 * Skips the build when the binaries are already there (`cached: true`).
 */
export async function buildLlama(opts: BuildOptions = {}): Promise<BuildResult> {
  const started = Date.now();
  const bundle = opts.bundle ?? bundlePath();
  if (!existsSync(bundle)) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `llama.cpp source bundle not found at ${bundle} (is node-llama-cpp installed? run \`npm install\`)`);
  const source = bundleKey(bundle);
  const binDir = opts.outDir ?? defaultBinDir();
  const result = (cached: boolean): BuildResult => ({
    bin_dir: binDir,
    binaries: Object.fromEntries(LLAMA_BINARIES.map((n) => [n, join(binDir, n)])),
    seconds: Math.round((Date.now() - started) / 100) / 10,
    cached,
    source,
  });
  if (!opts.force && hasBinaries(binDir)) return result(true);

  requireTools();
  const progress = opts.onProgress ?? (() => {});
  const work = mkdtempSync(join(tmpdir(), 'swarm-llama-build-'));
  try {
    const src = join(work, 'src');
    progress({ phase: 'clone' });
    await run('git', ['clone', '--quiet', bundle, src], work, () => {}, opts.signal);

    progress({ phase: 'configure' });
    const build = join(src, 'build');
    await run('cmake', ['-S', src, '-B', build, ...CMAKE_FLAGS], src, (line) => progress({ phase: 'configure', line }), opts.signal);

    progress({ phase: 'compile', percent: 0 });
    const jobs = String(opts.jobs ?? 2);
    await run('cmake', ['--build', build, '--config', 'Release', '-j', jobs, '--target', ...LLAMA_BINARIES], src, (line) => {
      const m = /^\[\s*(\d+)%\]/.exec(line);
      progress({ phase: 'compile', line, ...(m?.[1] ? { percent: Number(m[1]) } : {}) });
    }, opts.signal);

    progress({ phase: 'install' });
    mkdirSync(binDir, { recursive: true });
    // The llama-server driver's CPU-variant exclusions hold hard links to the old programs: drop them
    // with the choice they remember, which a new build must earn again.
    rmSync(join(binDir, '.cpu-variants'), { recursive: true, force: true });
    // The shared libraries first (llama, ggml, and a ggml-cpu library per CPU variant): a program
    // that appears before them would not start.
    const libs = readdirSync(join(build, 'bin')).filter((n) => /\.so(\.\d+)*$/.test(n));
    for (const name of libs) {
      const tmp = join(binDir, `.${name}.${process.pid}.tmp`);
      copyFileSync(join(build, 'bin', name), tmp);
      renameSync(tmp, join(binDir, name));
    }
    for (const name of LLAMA_BINARIES) {
      const from = join(build, 'bin', name);
      if (!existsSync(from)) throw new SwarmError('SWARM_ERR_ENGINE_BUILD', `the build produced no ${name} (looked in ${join(build, 'bin')})`);
      // Copy then rename, so a reader never sees a half-written binary.
      const tmp = join(binDir, `.${name}.${process.pid}.tmp`);
      copyFileSync(from, tmp);
      chmodSync(tmp, 0o755);
      renameSync(tmp, join(binDir, name));
    }
    writeFileSync(join(binDir, 'BUILD_INFO.json'), JSON.stringify({ source, bundle, flags: CMAKE_FLAGS, libraries: libs, built_at: new Date().toISOString() }, null, 2) + '\n');
    return result(false);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
