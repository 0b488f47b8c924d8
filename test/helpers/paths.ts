import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * The repo root, found from package.json rather than a fixed number of `..`: the tests run both as
 * TypeScript from test/ (`npx tap test/x.test.ts`) and compiled from dist/test/ (`npm test`).
 */
export const ROOT = ((): string => {
  for (let d = HERE; ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, 'package.json'))) return d;
    if (path.dirname(d) === d) throw new Error(`no package.json above ${HERE}`);
  }
})();

/** True when this is the compiled copy under dist/test (the suite's runner), not the TypeScript. */
export const COMPILED = path.relative(ROOT, HERE).split(path.sep)[0] === 'dist';

/** A file of test/fixtures that is not compiled (.mjs, .py, data): always the source copy. */
export function fixtureFile(name: string): string {
  return path.join(ROOT, 'test', 'fixtures', name);
}

/**
 * node arguments that run the TypeScript fixture `name` (e.g. 'batched-holder.ts'): its compiled copy
 * under the suite's runner, the source through tap's TypeScript loader otherwise.
 */
export function fixtureNodeArgs(name: string): string[] {
  if (COMPILED) return [path.join(ROOT, 'dist', 'test', 'fixtures', name.replace(/\.ts$/, '.js'))];
  return [...process.execArgv.filter((a) => a.includes('@tapjs/typescript')), path.join(ROOT, 'test', 'fixtures', name)];
}
