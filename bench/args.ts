import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root, whether a bench runs from dist/bench or from bench/. */
export const ROOT = path.basename(path.resolve(here, '..')) === 'dist' ? path.resolve(here, '../..') : path.resolve(here, '..');
/** The built `swarm` command. */
export const CLI = path.join(ROOT, 'dist/cli/main.js');

/** The options a bench declared (`arg`, `flag`), in order, for `--help` and for `checkArgs`. */
const declared = new Map<string, { dflt?: string; about: string }>();

/** The value after `--name` on the command line, or `dflt`. Declares the option (see `checkArgs`). */
export function arg(name: string, dflt: string, about = ''): string {
  declared.set(name, { dflt, about });
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
}

/** Is `--name` on the command line (an option without a value)? Declares it (see `checkArgs`). */
export function flag(name: string, about = ''): boolean {
  declared.set(name, { about });
  return process.argv.includes(`--${name}`);
}

/** The usage text: what the bench does, then every declared option with its default. */
export function usage(script: string, about: string): string {
  const rows = [...declared].map(([name, o]) => [`--${name}${o.dflt === undefined ? '' : ' <v>'}`, `${o.about}${o.dflt ? `${o.about ? ' ' : ''}(default ${o.dflt})` : ''}`]);
  const w = Math.max(0, ...rows.map(([l]) => l!.length));
  return [`usage: node dist/bench/${script}.js [options]`, '', about, '', 'options:', ...rows.map(([l, r]) => `  ${l!.padEnd(w)}  ${r}`), `  ${'--help'.padEnd(w)}  print this and exit`].join('\n');
}

/**
 * Check the command line against the options declared so far; call it once the bench has read them
 * all, before it starts work. `--help` (or `-h`) prints the usage and exits 0; an unknown option, an
 * option missing its value or a stray argument prints the error and the usage and exits 2, so a typo
 * never starts a long default run.
 */
export function checkArgs(script: string, about: string): void {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) { process.stdout.write(`${usage(script, about)}\n`); process.exit(0); }
  const bad = argvErrors(argv);
  if (bad) { process.stderr.write(`${script}: ${bad}\n\n${usage(script, about)}\n`); process.exit(2); }
}

/** The first thing wrong with `argv` against the declared options, or undefined. */
export function argvErrors(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) return `unexpected argument '${a}'`;
    const o = declared.get(a.slice(2));
    if (!o) return `unknown option '${a}'`;
    if (o.dflt === undefined) continue;
    if (i + 1 >= argv.length || argv[i + 1]!.startsWith('--')) return `option '${a}' needs a value`;
    i++;
  }
  return undefined;
}
