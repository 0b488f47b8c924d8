import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/paths.js';

// Where the product's code lives (test/ and bench/ keep their own helpers).
const PARTS = ['cli', 'deploy', 'drivers', 'hub', 'protocol', 'sched', 'topologies', 'worker'];

function sources(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : /\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

t.test('every production process starts through drivers/lifecycle.ts, and nothing imports execa', async (t) => {
  const offenders: string[] = [];
  for (const part of PARTS) {
    for (const f of sources(path.join(ROOT, part))) {
      const rel = path.relative(ROOT, f);
      const text = fs.readFileSync(f, 'utf8');
      if (/from ['"]execa['"]|import\(['"]execa['"]\)/.test(text)) offenders.push(`${rel}: execa`);
      if (rel !== path.join('drivers', 'lifecycle.ts') && /import\s+(?!type\b)[^;]*from ['"](node:)?child_process['"]/.test(text)) offenders.push(`${rel}: child_process`);
    }
  }
  t.same(offenders, []);
});
