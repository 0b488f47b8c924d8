#!/usr/bin/env node
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The `swarm` command. `swarm hub` loads the hub's code as one bundle (dist/hub-bundle, written by
 * `npm run build`: cli/bundle.ts): as ~110 modules, each read and linked on its own, their loading
 * took most of a restarted hub's time to listening on a busy host. The bundle is used only if it
 * holds the current code (`staleInput`) and not with SWARM_HUB_BUNDLE=0.
 */
const bundle = new URL('../hub-bundle/hub-main.js', import.meta.url);

/**
 * Why a bundle written at `built` (its entry's mtime: the build writes the entry last) does not
 * hold the current code, or undefined if it does: a module it was built from (the list cli/bundle.ts
 * writes beside it, inputs.json) is newer, or gone, or there is no list. Checking only this file's
 * time missed a `tsc` that rewrote hub modules and not this one (`incremental` rewrites only what
 * changed): `swarm hub` then ran the old code, and CLI tests passed against it. One stat per module
 * (256, the lazily loaded chunks' too: about 2 ms) is cheap beside what the bundle saves; a content
 * hash would read every file the bundle is there not to read, and a stamp written by the build
 * cannot see a `tsc` run after it. Here, not in a module of its own: every command loads this file,
 * and one more module is one more read.
 */
function staleInput(built: number): string | undefined {
  // Paths as strings: a URL made per module tripled the check's time (2 ms for 256 modules here).
  const dir = fileURLToPath(new URL('.', bundle));
  let inputs: unknown;
  try { inputs = JSON.parse(fs.readFileSync(dir + 'inputs.json', 'utf8')); } catch { return 'no readable inputs.json beside it'; }
  if (!Array.isArray(inputs) || !inputs.length || !inputs.every((f) => typeof f === 'string')) return 'its inputs.json is damaged';
  for (const f of inputs as string[]) {
    const st = fs.statSync(dir + f, { throwIfNoEntry: false });
    if (!st) return `${f} is gone`;
    if (st.mtimeMs > built) return `${f} is newer`;
  }
  return undefined;
}

function bundleFresh(): boolean {
  if (process.env.SWARM_HUB_BUNDLE === '0') return false;
  let built: number;
  // None built (`tsc` alone, or esbuild could not run in the image's build): the modules, silently.
  try { built = fs.statSync(bundle).mtimeMs; } catch { return false; }
  const stale = staleInput(built);
  if (stale) process.stderr.write(`swarm hub: its bundle in ${new URL('.', bundle).pathname} is stale (${stale}): loading its modules; \`npm run build\` writes it again\n`);
  return !stale;
}

/**
 * A bundle file missing or damaged (a truncated copy, a chunk deleted) fails while the bundle is
 * linked, before its entry's code runs (cli/hub-main.ts marks when it does): the hub then loads its
 * modules, as with no bundle. An error after the mark is the hub's own, and is not run twice.
 */
const RAN = Symbol.for('swarm.hub-bundle.ran');
let bundled = false;
if (process.argv[2] === 'hub' && bundleFresh()) {
  try {
    await import(bundle.href);
    bundled = true;
  } catch (e) {
    if ((globalThis as Record<symbol, unknown>)[RAN]) throw e;
    process.stderr.write(`swarm hub: its bundle in ${new URL('.', bundle).pathname} is damaged (${String((e as Error).message).split('\n')[0]}): loading its modules; \`npm run build\` writes it again\n`);
  }
}
if (!bundled) await (await import('./program.js')).runCli();
