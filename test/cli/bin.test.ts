import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/paths.js';

const main = path.join(ROOT, 'dist', 'cli', 'main.js');

// `npx swarm` (the README's first command) executes the package's bin itself, so the built file must be
// executable: tsc writes it 0644, and npm 11 runs the root package's bin without making it so.
t.test('the built swarm command runs as a program, as npx runs it', async (t) => {
  t.ok((fs.statSync(main).mode & 0o111) !== 0, 'dist/cli/main.js is executable');
  const r = spawnSync(main, ['--version'], { encoding: 'utf8' });
  t.equal(r.status, 0, r.error?.message ?? r.stderr);
  t.match(r.stdout, /^\d+\.\d+\.\d+/);
});
