import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root, whether a bench runs from dist/bench or from bench/. */
export const ROOT = path.basename(path.resolve(here, '..')) === 'dist' ? path.resolve(here, '../..') : path.resolve(here, '..');
/** The built `swarm` command. */
export const CLI = path.join(ROOT, 'dist/cli/main.js');

/** The value after `--name` on the command line, or `dflt`. */
export function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
}
