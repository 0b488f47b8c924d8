/**
 * Which addon and which of ggml's CPU variants an engine loads after a SIGILL. node-llama-cpp's
 * prebuilt addon and the self-built one (`swarm engine build --addon`) both load ggml's CPU backend as
 * one library per CPU variant, the best for the CPU chosen at run time; a VM that claims features it
 * faults on (seen: AMX on a Firecracker Sapphire Rapids) kills the engine with SIGILL in that variant,
 * at the model's load or its first decode.
 *
 * An engine cannot see its own SIGILL (no JavaScript runs after one), so the work is split: the engine
 * records before its native load what it is about to run (`addon-run-<pid>.json`, with the ladder it
 * climbs down, then the variant ggml loaded), and the process that started it, on seeing it die of
 * SIGILL, moves the remembered choice one step down: the self-built addon with the variants up to the
 * one that died hidden, then, when none is left, node-llama-cpp's prebuilt addon (and its variants the
 * same way), then nothing. A later engine starts from that choice, so a bad variant is run once per CPU
 * model, never in a loop. With a self-built addon the state lives beside it (`.cpu-variants/`); an
 * engine on the prebuilt addon alone (the per-worker engine, or no build) keeps it in the addon cache
 * (node_modules is not ours to write), per CPU model, like llama-server's (cpu-variant.ts).
 */
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { alive } from '../lifecycle.js';
import { addonCacheRoot, findSelfBuiltAddon, nlcDir, prebuiltCpuBackends, type SelfBuiltAddon } from './addon-paths.js';
import { cpuKey, cpuVariants, stateRoot } from './cpu-variant.js';

/**
 * The addons an engine may load, best first, and where their state lives: `self` the self-built addon's
 * folder (absent: the prebuilt addon is the first choice), `prebuilt` the folder of node-llama-cpp's
 * prebuilt addon and its CPU backends (absent: not installed as the engine would load it directly).
 */
export interface AddonLadder { root: string; self?: string; prebuilt?: string }

/** What an engine loads: an addon and how many of its top CPU variants are hidden from ggml; `none`: every choice died. */
export interface AddonChoice { kind: 'self-built' | 'prebuilt' | 'none'; skip: number }

/** The remembered choice, with what died to get there (for `swarm engine which` and the engine's log). */
export interface AddonChoiceRecord extends AddonChoice { cpu: string; died: string[] }

const CHOICE = 'addon-choice.json';
const runFile = (root: string, pid: number): string => join(root, `addon-run-${pid}.json`);
/** A run file of a dead engine older than this was not a SIGILL anyone saw (kill -9): pruned. */
const STALE_RUN_MS = 60_000;

/** The ladder of an engine that may load the self-built addon `own`: it first, then the prebuilt one. */
export function selfBuiltLadder(own: SelfBuiltAddon): AddonLadder {
  return { root: stateRoot(own.dir), self: own.dir, prebuilt: prebuiltCpuBackends(nlcDir())?.dir };
}

/**
 * The ladder of an engine on node-llama-cpp's prebuilt addon alone, whose folder is `addonDir` (by
 * default the installed package's): its state in the addon cache, one folder per addon folder.
 */
export function prebuiltLadder(env: NodeJS.ProcessEnv = process.env, addonDir = prebuiltCpuBackends(nlcDir())?.dir): AddonLadder | undefined {
  if (!addonDir) return undefined;
  const key = createHash('sha256').update(addonDir).digest('hex').slice(0, 12);
  const root = join(addonCacheRoot(env), 'cpu-variants', `prebuilt-${key}`);
  try { mkdirSync(root, { recursive: true, mode: 0o700 }); } catch { return undefined; } // no cache: no fallback, as before
  return { root, prebuilt: addonDir };
}

/**
 * The ladder an engine climbs down: with `selfBuilt` (the batched engine) the self-built addon's when
 * there is one, else the prebuilt addon's (`override`: a binding file loaded instead of it, in tests).
 * The engine and the process that started it both call this, with the same environment.
 */
export function engineLadder(opts: { selfBuilt?: boolean; override?: string }, env: NodeJS.ProcessEnv = process.env): AddonLadder | undefined {
  const own = opts.selfBuilt && !opts.override ? findSelfBuiltAddon(env) : undefined;
  if (own) return selfBuiltLadder(own);
  return prebuiltLadder(env, opts.override ? dirname(opts.override) : undefined);
}

/** The remembered choice on this CPU for `ladder`; undefined when nothing died here. */
export function rememberedAddonChoice(ladder: AddonLadder): AddonChoiceRecord | undefined {
  try {
    const c = JSON.parse(readFileSync(join(ladder.root, CHOICE), 'utf8')) as Partial<AddonChoiceRecord>;
    if (c.cpu !== cpuKey() || !['self-built', 'prebuilt', 'none'].includes(c.kind ?? '') || !Number.isInteger(c.skip) || c.skip! < 0) return undefined;
    return { cpu: c.cpu, kind: c.kind!, skip: c.skip!, died: Array.isArray(c.died) ? c.died.map(String) : [] };
  } catch { return undefined; }
}

/** What the engine should load now (its first addon as ggml picks, when nothing died here). */
export function addonChoice(ladder: AddonLadder): AddonChoice {
  const c = rememberedAddonChoice(ladder);
  return c ? { kind: c.kind, skip: c.skip } : { kind: ladder.self ? 'self-built' : 'prebuilt', skip: 0 };
}

/** Whether `c` is other than what the engine would load had nothing died on this CPU. */
export function isFallback(ladder: AddonLadder, c: AddonChoice): boolean {
  return c.skip > 0 || c.kind !== (ladder.self ? 'self-built' : 'prebuilt');
}

/** The folder of the addon a choice names: the self-built one's, or node-llama-cpp's prebuilt binaries. */
function choiceDir(ladder: AddonLadder, kind: AddonChoice['kind']): string | undefined {
  return kind === 'self-built' ? ladder.self : kind === 'prebuilt' ? ladder.prebuilt : undefined;
}

/** The CPU variants a choice hides from ggml. */
export function hiddenVariants(ladder: AddonLadder, c: AddonChoice): string[] {
  const dir = choiceDir(ladder, c.kind);
  if (!dir) return [];
  // At least one stays whatever the choice file says (a damaged one, or one from another build).
  const variants = cpuVariants(dir);
  return variants.slice(0, Math.min(c.skip, variants.length - 1));
}

/**
 * The addon file to load so that ggml does not see `hidden`: node-llama-cpp loads the CPU backends from
 * the folder of the path it is given, so a folder of symlinks to the files beside `addon` but the
 * hidden libraries (require() follows the addon's symlink to the real file, and its own libraries with it).
 */
export function addonWithout(ladder: AddonLadder, addon: string, hidden: readonly string[], tag: string): string {
  if (hidden.length === 0) return addon;
  const addonDir = dirname(addon);
  const dir = join(ladder.root, `${tag}-without-${hidden.join('-')}`);
  if (!existsSync(join(dir, basename(addon)))) {
    const skip = new Set(hidden.map((v) => `libggml-cpu-${v}.so`));
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    for (const name of readdirSync(addonDir)) if (!skip.has(name) && !name.startsWith('.')) symlinkSync(join(addonDir, name), join(tmp, name));
    // Another engine may have made it meanwhile: theirs is as good.
    try { renameSync(tmp, dir); } catch { rmSync(tmp, { recursive: true, force: true }); }
  }
  return join(dir, basename(addon));
}

/**
 * What this engine runs, for its starter to read if it dies of SIGILL: before its native load, and
 * again once loaded with the CPU variant ggml picked (`loaded`; undefined when it could not tell).
 */
export function recordAddonRun(ladder: AddonLadder, c: AddonChoice, loaded?: { variant: string | undefined }): void {
  const root = ladder.root;
  try {
    writeFileSync(runFile(root, process.pid), JSON.stringify({ ...c, ...(loaded?.variant ? { variant: loaded.variant } : {}) }) + '\n');
    if (loaded) return;
    process.once('exit', () => rmSync(runFile(root, process.pid), { force: true }));
    for (const n of readdirSync(root)) {
      const pid = Number(/^addon-run-(\d+)\.json$/.exec(n)?.[1]);
      if (pid > 0 && pid !== process.pid && !alive(pid) && Date.now() - statSync(join(root, n)).mtimeMs > STALE_RUN_MS) rmSync(join(root, n), { force: true });
    }
  } catch { /* only a cache: a SIGILL then costs another try */ }
}

/** The ggml CPU variant this process has loaded (from its memory map), if any. */
export function loadedCpuVariant(): string | undefined {
  try { return /libggml-cpu-([\w]+)\.so/.exec(readFileSync('/proc/self/maps', 'utf8'))?.[1]; } catch { return undefined; }
}

/** The choice after `run` died of SIGILL: hide the variant that died (and those above it), else the next addon. */
export function nextAddonChoice(ladder: AddonLadder, run: AddonChoice & { variant?: string }): AddonChoice {
  const dir = choiceDir(ladder, run.kind);
  if (dir) {
    const variants = cpuVariants(dir);
    const skip = Math.max(run.skip + 1, run.variant ? variants.indexOf(run.variant) + 1 : 0);
    // At least one variant stays: ggml with no CPU backend has nothing to run on.
    if (skip < variants.length) return { kind: run.kind, skip };
  }
  return run.kind === 'self-built' && ladder.prebuilt ? { kind: 'prebuilt', skip: 0 } : { kind: 'none', skip: 0 };
}

/**
 * The starter's side: engine `pid` died of SIGILL. Move the remembered choice past what it ran (the
 * engine's run file says) and return a line for the engine's log; undefined when the engine left no
 * record (it loaded its binding through getLlama(), or died before it chose).
 */
export function noteAddonSigill(pid: number, ladder: AddonLadder | undefined, log?: string): string | undefined {
  if (!ladder) return undefined;
  const root = ladder.root;
  let run: AddonChoice & { variant?: string };
  try { run = JSON.parse(readFileSync(runFile(root, pid), 'utf8')) as typeof run; } catch { return undefined; }
  rmSync(runFile(root, pid), { force: true });
  const before = rememberedAddonChoice(ladder);
  const next = nextAddonChoice(ladder, run);
  const what = `${run.kind} addon${run.variant ? `, CPU variant ${run.variant}` : ''}${run.skip ? ` (${hiddenVariants(ladder, run).join(', ')} hidden)` : ''}`;
  // Engines started together on the same choice all die of it: one entry says so.
  const died = before?.died.includes(what) ? before.died : [...(before?.died ?? []), what];
  const rec: AddonChoiceRecord = { cpu: cpuKey(), ...next, died };
  try { writeFileSync(join(root, CHOICE), JSON.stringify(rec) + '\n'); } catch { /* only a cache */ }
  const line = `engine ${pid} killed by SIGILL with the ${what}; next: ${describeChoice(ladder, next)}`;
  if (log) try { appendFileSync(log, `${line}\n`); } catch { /* the log is gone */ }
  return line;
}

/** One line for a choice: `self-built addon, CPU variants a, b hidden`, `prebuilt addon`, … */
export function describeChoice(ladder: AddonLadder, c: AddonChoice): string {
  if (c.kind === 'none') return `no addon (every CPU variant of the ${ladder.self ? 'self-built and the prebuilt addon' : 'prebuilt addon'} died of SIGILL)`;
  const hidden = hiddenVariants(ladder, c);
  return `${c.kind} addon${hidden.length ? `, CPU variant(s) ${hidden.join(', ')} hidden` : ''}`;
}

/** The fallback in one line with why, for status and `swarm engine which`; undefined when nothing died on this CPU. */
export function fallbackNote(ladder: AddonLadder | undefined): string | undefined {
  const rec = ladder ? rememberedAddonChoice(ladder) : undefined;
  if (!ladder || !rec || !isFallback(ladder, rec)) return undefined;
  return `${describeChoice(ladder, rec)} (killed by SIGILL on this CPU: ${rec.died.join('; ')})`;
}
