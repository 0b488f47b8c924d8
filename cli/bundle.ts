/**
 * Build step (`npm run build`, after tsc and the validators): bundle what `swarm hub` loads before it
 * listens (cli/hub-main.ts) into dist/hub-bundle, so that a hub restarted on a busy host reads a few
 * files instead of ~110 modules one after another (cli/main.ts uses it when it is fresh: no module it
 * was built from is newer than it). Split at the
 * dynamic imports: what the hub loads later (the worker command's runtime, the dashboard, drivers)
 * stays in chunks of its own, loaded when used, and every module is still one instance. Packages stay
 * in node_modules. Each module's `import.meta.url` is its own file's in dist/, as unbundled: paths the
 * code finds from it (the CLI a supervisor runs, an engine's host script, node-llama-cpp's files)
 * stay where they were.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Plugin } from 'esbuild';

const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(DIST, 'hub-bundle');

/** `import.meta.url` in a module from dist/ becomes that module's own URL, found from the chunk's (all chunks lie in OUT). */
const ownUrl: Plugin = {
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, async (args) => {
      const src = await fs.promises.readFile(args.path, 'utf8');
      if (!src.includes('import.meta.url')) return undefined;
      const rel = path.relative(OUT, args.path).split(path.sep).join('/');
      return { contents: src.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`), loader: 'js' };
    });
  },
};

/**
 * The command table's other commands (cli/program.ts) are never loaded in a hub process: left as
 * imports of their modules in dist/, not chunks that would split the hub's own code further.
 */
const otherCommands: Plugin = {
  name: 'other-commands',
  setup(b) {
    b.onResolve({ filter: /^\.\/commands\/[a-z-]+\.js$/ }, (args) => {
      if (args.kind !== 'dynamic-import' || args.importer !== path.join(DIST, 'cli/program.js') || args.path === './commands/hub.js') return undefined;
      return { path: `../cli/${args.path.slice(2)}`, external: true };
    });
  },
};

fs.rmSync(OUT, { recursive: true, force: true });
// `--if-possible` (the image's build stage): where esbuild cannot run (a cross-built image's stage
// under qemu has only the build host's esbuild binary) the hub loads its modules, as it does without
// a bundle: slower to start, the same code.
try {
  const { build } = await import('esbuild');
  const r = await build({
    entryPoints: [path.join(DIST, 'cli/hub-main.js')],
    outdir: OUT, bundle: true, splitting: true, format: 'esm', platform: 'node', target: 'node20',
    packages: 'external', plugins: [otherCommands, ownUrl], logLevel: 'warning', metafile: true,
  });
  // The modules it was built from, relative to OUT: cli/main.ts takes the bundle as stale when any
  // of them is newer (`staleInput`).
  const inputs = Object.keys(r.metafile.inputs).map((f) => path.relative(OUT, path.resolve(f)).split(path.sep).join('/'));
  fs.writeFileSync(path.join(OUT, 'inputs.json'), JSON.stringify(inputs) + '\n');
} catch (e) {
  fs.rmSync(OUT, { recursive: true, force: true });
  if (!process.argv.includes('--if-possible')) throw e;
  process.stderr.write(`bundle: esbuild cannot run here (${(e as Error).message.split('\n')[0]}): the hub will load its modules\n`);
  process.exit(0);
}
// Written last: cli/main.ts takes the bundle as fresh by this file's time.
fs.utimesSync(path.join(OUT, 'hub-main.js'), new Date(), new Date());
