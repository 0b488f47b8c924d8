#!/usr/bin/env node
import fs from 'node:fs';

/**
 * The `swarm` command. `swarm hub` loads the hub's code as one bundle (dist/hub-bundle, written by
 * `npm run build`: cli/bundle.ts): as ~110 modules, each read and linked on its own, their loading
 * took most of a restarted hub's time to listening on a busy host. The bundle is used only if it was
 * written after this file (a `tsc` run alone since leaves it stale: the modules are loaded then), and
 * not with SWARM_HUB_BUNDLE=0.
 */
const bundle = new URL('../hub-bundle/hub-main.js', import.meta.url);

function bundleFresh(): boolean {
  if (process.env.SWARM_HUB_BUNDLE === '0') return false;
  try { return fs.statSync(bundle).mtimeMs >= fs.statSync(new URL(import.meta.url)).mtimeMs; } catch { return false; }
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
