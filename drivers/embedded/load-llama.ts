/**
 * How the engine host gets its llama.cpp binding, without node-llama-cpp's binary test when that is safe.
 *
 * On Linux, getLlama() tests a prebuilt binary before loading it: it forks a node process that loads
 * the binary and initialises llama.cpp, so that an incompatible binary cannot crash the caller. That
 * process cost about 0.45 CPU-s per engine here (a third of an agent's start-up). The engine host is
 * already that sacrificial process: it exists so that a native crash takes down only itself, and its
 * driver turns an exit before `ready` into SWARM_ERR_ENGINE_START with the host's last stderr lines.
 * So when getLlama() would pick node-llama-cpp's own prebuilt CPU binary anyway, the host loads it
 * directly through the same Llama._create() that getLlama() ends with, minus the test. Anything else
 * (a local build, a cloned llama.cpp, binaries in node-llama-cpp's bins/, another package version, an
 * API that moved) goes through getLlama() as before.
 *
 * With `selfBuilt` (the batched engine), a self-built addon (`swarm engine build --addon`, cached under
 * ~/.cache/swarm/node-llama-cpp) comes first when it is there: the same binding built from the same
 * llama.cpp source, plus options the prebuilt one lacks (kvUnified). SWARM_ADDON=prebuilt ignores it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { getLlama, Llama, type LlamaLogLevel } from 'node-llama-cpp';
import { SwarmError } from '../../protocol/index.js';
import { readAddonDir, type SelfBuiltAddon } from '../llama-build/addon-paths.js';
import { addonChoice, addonWithout, describeChoice, engineLadder, fallbackNote, hiddenVariants, isFallback, loadedCpuVariant, recordAddonRun, type AddonChoice } from '../llama-build/addon-variant.js';

type Logger = (level: LlamaLogLevel, message: string) => void;

/** What Llama._create takes (internal to node-llama-cpp 3.x; checked at run time before use). */
interface CreateOptions {
  bindings: unknown; bindingPath: string; extBackendsPath: undefined; buildType: 'prebuilt' | 'localBuild';
  buildMetadata: { buildOptions: { gpu: unknown; customCmakeOptions: unknown; llamaCpp: { repo: string; release: string } } };
  logLevel: LlamaLogLevel; logger: Logger; maxThreads: undefined; vramPadding: number; ramPadding: (total: number) => number;
  skipLlamaInit: boolean; debug: boolean; numa: false; tempDir: false; experimentalOptions: undefined;
}
type WithCreate = { _create?: (o: CreateOptions) => Promise<Llama> };

/**
 * How the binding was loaded: `prebuilt-direct` skipped node-llama-cpp's test process; `getLlama` did
 * not; `self-built` is the addon of `swarm engine build --addon`.
 */
export type LlamaLoadPath = 'prebuilt-direct' | 'getLlama' | 'self-built';

const exists = (p: string): boolean => fs.existsSync(p);

/** Set by loadLlama when a SIGILL on this CPU made it load something else than it would (addon-variant.ts). */
let fallback: string | undefined;

/** What this engine loads instead of its first choice after a SIGILL on this CPU; undefined when nothing died here. */
export function loadFallback(): string | undefined { return fallbackWhy; }
let fallbackWhy: string | undefined;

/** How the binding was loaded, for the engine's info file (status, passport): the path, and any SIGILL fallback. */
export function bindingNote(path: LlamaLoadPath): string {
  return fallback ? `${path}; after SIGILL on this CPU: ${fallback}` : path;
}
const readJson = (p: string): unknown => JSON.parse(fs.readFileSync(p, 'utf8'));

/**
 * The prebuilt CPU binary getLlama({gpu:false, build:'never'}) would load on this machine, or
 * undefined when it might pick something else (then getLlama decides, test included).
 */
export function directPrebuilt(): { addon: string; metadata: CreateOptions['buildMetadata']; require: NodeJS.Require } | undefined {
  if (process.platform !== 'linux') return undefined; // getLlama tests prebuilt binaries only on Linux
  const req = createRequire(import.meta.url);
  let nlcDir: string;
  try { nlcDir = path.dirname(path.dirname(req.resolve('node-llama-cpp'))); } catch { return undefined; }
  const folder = `linux-${process.arch}`;
  // getLlama prefers these, in this order, to the package's prebuilt binary.
  if (exists(path.join(nlcDir, 'llama', 'localBuilds')) || exists(path.join(nlcDir, 'llama', 'llama.cpp'))
    || exists(path.join(nlcDir, 'bins', folder))) return undefined;
  let pkgDir: string;
  try {
    const nlcReq = createRequire(path.join(nlcDir, 'package.json'));
    pkgDir = path.dirname(path.dirname(nlcReq.resolve(`@node-llama-cpp/${folder}`))); // its main is dist/index.js
    const version = (readJson(path.join(nlcDir, 'package.json')) as { version?: string }).version;
    if (!version?.startsWith('3.')) return undefined; // Llama._create as read in 3.x (3.22.1)
    // getLlama ignores a binaries package of another version.
    if ((readJson(path.join(pkgDir, 'package.json')) as { version?: string }).version !== version) return undefined;
  } catch { return undefined; }
  const bins = path.join(pkgDir, 'bins', folder);
  const addon = path.join(bins, 'llama-addon.node');
  const metaFile = path.join(bins, '_nlcBuildMetadata.json');
  if (!exists(addon) || !exists(metaFile)) return undefined;
  let metadata: CreateOptions['buildMetadata'];
  try { metadata = readJson(metaFile) as CreateOptions['buildMetadata']; } catch { return undefined; }
  if (metadata?.buildOptions?.gpu !== false || typeof (Llama as unknown as WithCreate)._create !== 'function') return undefined;
  return { addon, metadata, require: req };
}

/**
 * A Llama on the CPU, quiet but for `logger`. `addonOverride` (tests) loads that file as the binding
 * instead of the prebuilt one, to show what a broken binary does.
 */
export async function loadLlama(opts: { logLevel: LlamaLogLevel; logger: Logger; addonOverride?: string; selfBuilt?: boolean }): Promise<{ llama: Llama; path: LlamaLoadPath }> {
  // After a SIGILL on this CPU (addon-variant.ts): the addon and CPU variants that have not died here.
  const ladder = engineLadder({ selfBuilt: opts.selfBuilt, override: opts.addonOverride });
  const choice: AddonChoice | undefined = ladder ? addonChoice(ladder) : undefined;
  if (ladder && choice && isFallback(ladder, choice)) {
    fallback = describeChoice(ladder, choice);
    fallbackWhy = fallbackNote(ladder);
    process.stderr.write(`warning: after SIGILL on this CPU, loading the ${fallback}\n`);
  }
  if (ladder && choice?.kind === 'none') {
    throw new SwarmError('SWARM_ERR_ENGINE_START', `every CPU variant of the ${ladder.self ? 'self-built and the prebuilt' : 'prebuilt'} llama.cpp addon was killed by SIGILL on this CPU (${ladder.root}/addon-choice.json; remove it to try again)`);
  }
  const own = ladder?.self ? readAddonDir(ladder.self) : undefined;
  if (ladder && own && choice?.kind === 'self-built') {
    const addon = addonWithout(ladder, own.addon, hiddenVariants(ladder, choice), 'addon');
    recordAddonRun(ladder, choice);
    const llama = await loadSelfBuilt({ ...own, addon }, opts).catch((err: unknown) => {
      // A build that does not load (another node, a moved API) must not stop the engine: the prebuilt one still runs.
      process.stderr.write(`self-built addon ${own.addon} did not load (${err instanceof Error ? err.message : String(err)}); using the prebuilt one\n`);
      return undefined;
    });
    if (llama) { recordAddonRun(ladder, choice, { variant: loadedCpuVariant() }); return { llama, path: 'self-built' }; }
  }
  const direct = directPrebuilt();
  // The prebuilt addon (first, or after the self-built one died with every variant): its variants hidden the same way.
  const prebuiltRun = ladder && choice?.kind === 'prebuilt' && (direct || opts.addonOverride) ? ladder : undefined;
  const base = opts.addonOverride ?? direct?.addon;
  const addonFile = prebuiltRun && base ? addonWithout(prebuiltRun, base, hiddenVariants(prebuiltRun, choice!), 'prebuilt') : base;
  if (!direct) {
    // getLlama() picks and tests its binary itself: nothing of ours to hide, but a SIGILL still moves
    // the choice down, so that the ladder ends (`none`) rather than an engine dying at every start.
    if (ladder && choice?.kind === 'prebuilt') recordAddonRun(ladder, choice);
    const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false, logLevel: opts.logLevel, logger: opts.logger });
    return { llama, path: 'getLlama' };
  }
  if (prebuiltRun) recordAddonRun(prebuiltRun, choice!);
  const addon = addonFile!;
  // Said before the native load, so that a crash inside it leaves this line in the error's stderr tail.
  process.stderr.write(`loading llama.cpp binding ${addon} (node-llama-cpp's binary test skipped: this process is the sandbox)\n`);
  let bindings: unknown;
  try {
    bindings = direct.require(addon);
  } catch (err) {
    throw new Error(`cannot load the llama.cpp binding ${addon}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const create = (Llama as unknown as Required<WithCreate>)._create.bind(Llama);
  try {
    const llama = await create({
      bindings, bindingPath: addon, extBackendsPath: undefined, buildType: 'prebuilt', buildMetadata: direct.metadata,
      logLevel: opts.logLevel, logger: opts.logger, maxThreads: undefined,
      vramPadding: 0, // CPU only: getLlama leaves the VRAM padding at 0 when there is no GPU
      ramPadding: (total) => Math.floor(Math.min(total * 0.25, 1024 ** 3)), // getLlama's default on Linux
      skipLlamaInit: false, debug: process.env.NODE_LLAMA_CPP_DEBUG === 'true', numa: false, tempDir: false, experimentalOptions: undefined,
    });
    if (prebuiltRun) recordAddonRun(prebuiltRun, choice!, { variant: loadedCpuVariant() });
    return { llama, path: 'prebuilt-direct' };
  } catch (err) {
    // The binary loaded, so this is the internal API having moved (another 3.x): do it getLlama's way.
    if (opts.addonOverride) throw err;
    process.stderr.write(`direct load failed (${err instanceof Error ? err.message : String(err)}); using getLlama()\n`);
    const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false, logLevel: opts.logLevel, logger: opts.logger });
    return { llama, path: 'getLlama' };
  }
}

/** The self-built addon, loaded as getLlama() would load a local build, minus its test process (this process is the sandbox). */
async function loadSelfBuilt(own: SelfBuiltAddon, opts: { logLevel: LlamaLogLevel; logger: Logger }): Promise<Llama> {
  if (typeof (Llama as unknown as WithCreate)._create !== 'function') throw new Error('node-llama-cpp has no Llama._create');
  process.stderr.write(`loading llama.cpp binding ${own.addon} (self-built, node-llama-cpp ${own.info.nlc_version}, llama.cpp ${own.info.source})\n`);
  const bindings: unknown = createRequire(import.meta.url)(own.addon);
  const create = (Llama as unknown as Required<WithCreate>)._create.bind(Llama);
  return create({
    bindings, bindingPath: own.addon, extBackendsPath: undefined, buildType: 'localBuild',
    buildMetadata: { buildOptions: { gpu: false, customCmakeOptions: {}, llamaCpp: { repo: 'ggml-org/llama.cpp', release: own.info.release } } },
    logLevel: opts.logLevel, logger: opts.logger, maxThreads: undefined,
    vramPadding: 0, ramPadding: (total) => Math.floor(Math.min(total * 0.25, 1024 ** 3)),
    skipLlamaInit: false, debug: process.env.NODE_LLAMA_CPP_DEBUG === 'true', numa: false, tempDir: false, experimentalOptions: undefined,
  });
}
