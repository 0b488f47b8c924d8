import { spawnSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/paths.js';

/**
 * The benches' command line (bench/args.ts): `--help` prints the options and runs nothing; an unknown
 * option, a missing value or a stray argument is a usage error (exit 2), so a typo never starts the
 * default run (for the soak, a million tasks).
 */
const soak = (...args: string[]) => spawnSync(process.execPath, [path.join(ROOT, 'dist/bench/soak.js'), ...args], { encoding: 'utf8', timeout: 30_000 });

t.test('soak --help prints its options and exits 0 without running', async (t) => {
  const r = soak('--help');
  t.equal(r.status, 0, 'exit 0');
  t.match(r.stdout, /usage: node dist\/bench\/soak\.js/, 'usage line');
  for (const o of ['--tasks <v>', '--retain <v>', '--max-min <v>', '--json', '--keep', '--no-memstat']) t.ok(r.stdout.includes(o), `lists ${o}`);
  t.match(r.stdout, /--tasks <v> +tasks to submit \(default 1000000\)/, 'with what it does and its default');
});

t.test('soak with a mistyped option, a missing value or a stray argument is a usage error', async (t) => {
  for (const [args, why] of [[['--taks', '5'], /unknown option '--taks'/], [['--tasks'], /option '--tasks' needs a value/], [['--tasks', '--json'], /needs a value/], [['5000'], /unexpected argument '5000'/]] as const) {
    const r = soak(...args);
    t.equal(r.status, 2, `${args.join(' ')}: exit 2`);
    t.match(r.stderr, why, `${args.join(' ')}: says why`);
    t.match(r.stderr, /usage:/, `${args.join(' ')}: and shows the usage`);
  }
});
