import { copyFileSync, existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A portable llama.cpp build (GGML_BACKEND_DL) ships one libggml-cpu-<variant>.so per x86 CPU level and
 * loads the one scoring highest on the CPU's cpuid flags. Some VMs (Firecracker on Sapphire Rapids)
 * claim AMX/AVX512 features they then fault on, and the engine dies with SIGILL while loading the model.
 * The way out is to hide the top variants from ggml: it only looks in the executable's own directory
 * (/proc/self/exe), so a hidden variant needs a directory of its own holding a hard link (or copy) of
 * the program and symlinks to every other file of the build.
 */

/** ggml's x86 variants, highest score first (scores from ggml-cpu/arch/x86/cpu-feats.cpp: feature bits summed). */
export const VARIANT_ORDER = ['sapphirerapids', 'zen4', 'cooperlake', 'icelake', 'cascadelake', 'cannonlake', 'skylakex',
  'alderlake', 'haswell', 'piledriver', 'ivybridge', 'sandybridge', 'sse42', 'x64'];

const LIB = /^libggml-cpu-(.+)\.so$/;

/** The program's real path; a missing one is left for the spawn to report. */
export function resolved(bin: string): string {
  try { return realpathSync(bin); } catch { return bin; }
}

/** The CPU variants a build directory holds, in ggml's order of preference (unknown names last). */
export function cpuVariants(binDir: string): string[] {
  let names: string[];
  try { names = readdirSync(binDir); } catch { return []; }
  const found = names.map((n) => LIB.exec(n)?.[1]).filter((v): v is string => v !== undefined);
  const rank = (v: string): number => { const i = VARIANT_ORDER.indexOf(v); return i < 0 ? VARIANT_ORDER.length : i; };
  return found.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** Where the exclusion dirs and the remembered choice live: beside the build, else under the temp dir. */
export function stateRoot(binDir: string): string {
  const beside = path.join(binDir, '.cpu-variants');
  try { mkdirSync(beside, { recursive: true }); return beside; } catch {
    // The temp dir is shared: a directory there that another user made could hold their program under
    // the name we run. Ours only if we own it and no one else may write it; else a fresh private one.
    const uid = process.getuid?.() ?? -1;
    const tmp = path.join(os.tmpdir(), `swarm-cpu-variants-${uid}-${Buffer.from(binDir).toString('base64url').slice(-40)}`);
    try {
      mkdirSync(tmp, { recursive: true, mode: 0o700 });
      const st = lstatSync(tmp);
      if (st.isDirectory() && st.uid === uid && (st.mode & 0o077) === 0) return tmp;
    } catch { /* taken: below */ }
    return mkdtempSync(path.join(os.tmpdir(), 'swarm-cpu-variants-'));
  }
}

/** The choice is per CPU model: a build cache on a shared home may serve several kinds of host. */
export const cpuKey = (): string => os.cpus()[0]?.model ?? 'unknown';

/** How many top variants to hide on this CPU, as remembered from an earlier SIGILL (0 if none). */
export function rememberedSkip(bin: string): number {
  const binDir = path.dirname(resolved(bin));
  const file = path.join(stateRoot(binDir), 'choice.json');
  try {
    const c = JSON.parse(readFileSync(file, 'utf8')) as { cpu?: string; skip?: number };
    // A damaged file (a negative or fractional skip) counts as nothing remembered.
    return c.cpu === cpuKey() && Number.isInteger(c.skip) && c.skip! > 0 ? c.skip! : 0;
  } catch { return 0; }
}

/** The remembered choice on this CPU, for `swarm engine which`: the variant ggml runs and those hidden from it. */
export function rememberedChoice(bin: string): { chosen?: string; excluded: string[] } | undefined {
  const skip = rememberedSkip(bin);
  if (skip <= 0) return undefined;
  const variants = cpuVariants(path.dirname(resolved(bin)));
  return { chosen: variants[skip], excluded: variants.slice(0, skip) };
}

export function rememberSkip(bin: string, skip: number, chosen: string | undefined): void {
  const binDir = path.dirname(resolved(bin));
  try { writeFileSync(path.join(stateRoot(binDir), 'choice.json'), JSON.stringify({ cpu: cpuKey(), skip, chosen }) + '\n'); } catch { /* only a cache */ }
}

/**
 * The program to run so ggml cannot see the first `skip` variants of `variants`: `bin` itself for 0,
 * else a hard link (or copy) of it in a directory whose other entries link to the build's files.
 */
export function binWithout(bin: string, variants: readonly string[], skip: number): string {
  if (skip <= 0) return bin;
  const real = resolved(bin);
  const binDir = path.dirname(real);
  const hidden = new Set(variants.slice(0, skip).map((v) => `libggml-cpu-${v}.so`));
  const dir = path.join(stateRoot(binDir), `without-${variants.slice(0, skip).join('-')}`);
  const exe = path.join(dir, path.basename(real));
  if (existsSync(exe)) {
    // The view may have been made for another program of the build (llama-server, then llama-completion),
    // which links this one as a symlink: run through it, ggml would follow it back to every variant.
    if (!lstatSync(exe).isSymbolicLink()) return exe;
    const own = `${exe}.tmp-${process.pid}`;
    rmSync(own, { force: true });
    try { linkSync(real, own); } catch { copyFileSync(real, own); }
    renameSync(own, exe);
    return exe;
  }
  // Build beside and rename, so a concurrent start never sees half a directory.
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  for (const name of readdirSync(binDir)) {
    if (hidden.has(name) || name === '.cpu-variants') continue;
    const from = path.join(binDir, name);
    if (name === path.basename(real)) {
      try { linkSync(from, path.join(tmp, name)); } catch { copyFileSync(from, path.join(tmp, name)); }
    } else symlinkSync(from, path.join(tmp, name));
  }
  // renameSync fails when another start made `dir` first; theirs is as good as ours.
  try { renameSync(tmp, dir); } catch { rmSync(tmp, { recursive: true, force: true }); }
  return exe;
}
