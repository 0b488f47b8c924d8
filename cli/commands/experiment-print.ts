import fs from 'node:fs';
import path from 'node:path';
import type { Passport } from '../../topologies/passport.js';
import type { ExperimentResult } from '../../topologies/experiment/index.js';
import { budgetLines, ciNote, formatMcNemar, holmNote } from '../../topologies/experiment/index.js';
import { modelLine, simulatedNote } from '../../topologies/experiment/report.js';

const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '-');

/** An experiment's result as the terminal shows it: conditions, budget, paired comparisons, and what ran. */
export function printExperiment(x: ExperimentResult, dir: string): string {
  let passport: Passport | undefined;
  try { passport = JSON.parse(fs.readFileSync(path.join(dir, 'passport.json'), 'utf8')) as Passport; } catch { /* folder elsewhere */ }
  const sim = passport ? simulatedNote(passport, x) : undefined;
  const head = ['condition', 'n', 'failed', 'mean', '± se', '95% CI', 'tokens/item', 'cached/item', 'wall s/item', 'k'];
  const rows = x.conditions.map((c) => [c.name, String(c.n), String(c.failed), f3(c.mean), f3(c.se), `[${f3(c.ci[0])}, ${f3(c.ci[1])}]`,
    c.tokens_per_item.toFixed(1), (c.cached_tokens_per_item ?? 0).toFixed(1), (c.wall_ms_per_item / 1000).toFixed(2), c.k !== undefined ? String(c.k) : '']);
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => `    ${r.map((c, i) => c.padEnd(w[i]!)).join('  ')}`;
  const holm = holmNote(x);
  return [
    ...(sim ? [`  ${sim}`] : []),
    `  ${x.items} items, scorer ${x.scorer}${passport ? `, ${modelLine(passport, x)}` : ''}`,
    line(head), ...rows.map(line),
    `  ${ciNote(x)}; tokens/item: computed (evaluated prompt + output), prefix-cache hits apart`,
    ...budgetLines(x).map((l) => `  ${l}`),
    ...x.comparisons.map((c) => `  ${c.a} − ${c.b}: ${c.mean_diff >= 0 ? '+' : ''}${f3(c.mean_diff)} [${f3(c.ci[0])}, ${f3(c.ci[1])}] (paired, n = ${c.n})${c.mcnemar ? `; ${formatMcNemar(c.mcnemar)}` : ''}`),
    ...(holm ? [`  ${holm}`] : []),
    `  per item: ${path.join(dir, 'experiment.html')}`,
  ].join('\n');
}
