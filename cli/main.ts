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

if (process.argv[2] === 'hub' && bundleFresh()) await import(bundle.href);
else await (await import('./program.js')).runCli();
