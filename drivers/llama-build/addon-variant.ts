/**
 * Which addon and which of ggml's CPU variants an engine loads after a SIGILL. The self-built addon
 * (`swarm engine build --addon`) loads ggml's CPU backend as one library per CPU variant, the best
 * for the CPU chosen at run time; a VM that claims features it faults on (seen: AMX on a Firecracker
 * Sapphire Rapids) kills the engine with SIGILL in that variant, at the model's load or its first decode.
 *
 * An engine cannot see its own SIGILL (no JavaScript runs after one), so the work is split: the engine
 * records before its native load what it is about to run (`addon-run-<pid>.json`, then the variant ggml
 * loaded), and the process that started it, on seeing it die of SIGILL, moves the remembered choice one
 * step down: the self-built addon with the variants up to the one that died hidden, then, when none is
 * left, node-llama-cpp's prebuilt addon (and its variants the same way), then nothing. A later engine
 * starts from that choice, so a bad variant is run once per CPU model, never in a loop. State lives
 * beside the self-built addon (`.cpu-variants/`), per CPU model, like llama-server's (cpu-variant.ts).
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { alive } from '../lifecycle.js';
import { ADDON_FILE, findSelfBuiltAddon, nlcDir, prebuiltCpuBackends, type SelfBuiltAddon } from './addon-paths.js';
import { cpuKey, cpuVariants, stateRoot } from './cpu-variant.js';

/** What an engine loads: an addon and how many of its top CPU variants are hidden from ggml; `none`: every choice died. */
export interface AddonChoice { kind: 'self-built' | 'prebuilt' | 'none'; skip: number }

/** The remembered choice, with what died to get there (for `swarm engine which` and the engine's log). */
export interface AddonChoiceRecord extends AddonChoice { cpu: string; died: string[] }

const CHOICE = 'addon-choice.json';
const runFile = (root: string, pid: number): string => join(root, `addon-run-${pid}.json`);
/** A run file of a dead engine older than this was not a SIGILL anyone saw (kill -9): pruned. */
const STALE_RUN_MS = 60_000;

/** The remembered choice on this CPU for the self-built addon `own`; undefined when nothing died here. */
export function rememberedAddonChoice(own: SelfBuiltAddon): AddonChoiceRecord | undefined {
  try {
    const c = JSON.parse(readFileSync(join(stateRoot(own.dir), CHOICE), 'utf8')) as Partial<AddonChoiceRecord>;
    if (c.cpu !== cpuKey() || !['self-built', 'prebuilt', 'none'].includes(c.kind ?? '') || !Number.isInteger(c.skip) || c.skip! < 0) return undefined;
    return { cpu: c.cpu, kind: c.kind!, skip: c.skip!, died: Array.isArray(c.died) ? c.died.map(String) : [] };
  } catch { return undefined; }
}

/** What the engine should load now (the self-built addon as ggml picks, when nothing died here). */
export function addonChoice(own: SelfBuiltAddon): AddonChoice {
  const c = rememberedAddonChoice(own);
  return c ? { kind: c.kind, skip: c.skip } : { kind: 'self-built', skip: 0 };
}

/** The folder of the addon a choice names: the self-built one's, or node-llama-cpp's prebuilt binaries. */
function choiceDir(own: SelfBuiltAddon, kind: AddonChoice['kind']): string | undefined {
  return kind === 'self-built' ? own.dir : kind === 'prebuilt' ? prebuiltCpuBackends(nlcDir())?.dir : undefined;
}

/** The CPU variants a choice hides from ggml. */
export function hiddenVariants(own: SelfBuiltAddon, c: AddonChoice): string[] {
  const dir = choiceDir(own, c.kind);
  if (!dir) return [];
  // At least one stays whatever the choice file says (a damaged one, or one from another build).
  const variants = cpuVariants(dir);
  return variants.slice(0, Math.min(c.skip, variants.length - 1));
}

/**
 * The addon file to load so that ggml does not see `hidden`: node-llama-cpp loads the CPU backends from
 * the folder of the path it is given, so a folder of symlinks to `addonDir`'s files but the hidden
 * libraries (require() follows the addon's symlink to the real file, and its own libraries with it).
 */
export function addonWithout(own: SelfBuiltAddon, addonDir: string, hidden: readonly string[], tag: string): string {
  if (hidden.length === 0) return join(addonDir, ADDON_FILE);
  const dir = join(stateRoot(own.dir), `${tag}-without-${hidden.join('-')}`);
  if (!existsSync(join(dir, ADDON_FILE))) {
    const skip = new Set(hidden.map((v) => `libggml-cpu-${v}.so`));
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    for (const name of readdirSync(addonDir)) if (!skip.has(name) && !name.startsWith('.')) symlinkSync(join(addonDir, name), join(tmp, name));
    // Another engine may have made it meanwhile: theirs is as good.
    try { renameSync(tmp, dir); } catch { rmSync(tmp, { recursive: true, force: true }); }
  }
  return join(dir, ADDON_FILE);
}

/**
 * What this engine runs, for its starter to read if it dies of SIGILL: before its native load, and
 * again once loaded with the CPU variant ggml picked (`loaded`; undefined when it could not tell).
 */
export function recordAddonRun(own: SelfBuiltAddon, c: AddonChoice, loaded?: { variant: string | undefined }): void {
  const root = stateRoot(own.dir);
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
export function nextAddonChoice(own: SelfBuiltAddon, run: AddonChoice & { variant?: string }): AddonChoice {
  const dir = choiceDir(own, run.kind);
  if (dir) {
    const variants = cpuVariants(dir);
    const skip = Math.max(run.skip + 1, run.variant ? variants.indexOf(run.variant) + 1 : 0);
    // At least one variant stays: ggml with no CPU backend has nothing to run on.
    if (skip < variants.length) return { kind: run.kind, skip };
  }
  return run.kind === 'self-built' ? { kind: 'prebuilt', skip: 0 } : { kind: 'none', skip: 0 };
}

/**
 * The starter's side: engine `pid` died of SIGILL. Move the remembered choice past what it ran (the
 * engine's run file says) and return a line for the engine's log; undefined when it ran no self-built
 * addon's choice (SWARM_ADDON=prebuilt, no build) or left no record.
 */
export function noteAddonSigill(pid: number, env: NodeJS.ProcessEnv = process.env, log?: string): string | undefined {
  const own = findSelfBuiltAddon(env);
  if (!own) return undefined;
  const root = stateRoot(own.dir);
  let run: AddonChoice & { variant?: string };
  try { run = JSON.parse(readFileSync(runFile(root, pid), 'utf8')) as typeof run; } catch { return undefined; }
  rmSync(runFile(root, pid), { force: true });
  const before = rememberedAddonChoice(own);
  const next = nextAddonChoice(own, run);
  const what = `${run.kind} addon${run.variant ? `, CPU variant ${run.variant}` : ''}${run.skip ? ` (${hiddenVariants(own, run).join(', ')} hidden)` : ''}`;
  const rec: AddonChoiceRecord = { cpu: cpuKey(), ...next, died: [...(before?.died ?? []), what] };
  try { writeFileSync(join(root, CHOICE), JSON.stringify(rec) + '\n'); } catch { /* only a cache */ }
  const line = `engine ${pid} killed by SIGILL with the ${what}; next: ${describeChoice(own, next)}`;
  if (log) try { appendFileSync(log, `${line}\n`); } catch { /* the log is gone */ }
  return line;
}

/** One line for a choice: `self-built addon, CPU variants a, b hidden`, `prebuilt addon`, … */
export function describeChoice(own: SelfBuiltAddon, c: AddonChoice): string {
  if (c.kind === 'none') return 'no addon (every CPU variant of the self-built and the prebuilt addon died of SIGILL)';
  const hidden = hiddenVariants(own, c);
  return `${c.kind} addon${hidden.length ? `, CPU variant(s) ${hidden.join(', ')} hidden` : ''}`;
}
