import type { ExperimentResult } from './finalize.js';

/** Sentences every report prints beside the numbers, so none of them can be read wrongly. */

const pct = (r: number) => `${r >= 0 ? '+' : '−'}${Math.abs(Math.round(r * 100))}%`;

/** Which interval each condition got. */
export function ciNote(x: Pick<ExperimentResult, 'conditions'>): string {
  const methods = new Set(x.conditions.map((c) => c.ci_method ?? 'bootstrap'));
  const parts = [...methods].map((m) => (m === 'clopper-pearson' ? 'Clopper-Pearson (exact binomial) for 0/1 scores' : 'seeded percentile bootstrap over items for other scores'));
  return `95% CI: ${parts.join('; ')}`;
}

/** The budget sentence: equal compute only when it is; a capped or rounded k says by how much the budgets differ. */
export function budgetLines(x: Pick<ExperimentResult, 'budget'>): string[] {
  const b = x.budget;
  if (!b) return [];
  const head = b.method === 'given' ? `votes: ${b.text}` : b.capped ? `UNEQUAL compute: ${b.text}` : `compute matched: ${b.text}`;
  const spent = b.spent && Number.isFinite(b.spent.topology_per_item)
    ? b.spent.votes.map((v) => `over the run: ${v.condition} spent ${v.tokens_per_item.toFixed(1)} computed tokens/item, the topology ${b.spent!.topology_per_item.toFixed(1)} (${Number.isFinite(v.vs_topology) ? pct(v.vs_topology) : 'n/a'})`)
    : [];
  return [head, ...spent];
}

/** What the Holm column means, when a run makes more than one test. */
export function holmNote(x: Pick<ExperimentResult, 'comparisons'>): string | undefined {
  const m = x.comparisons.filter((c) => c.mcnemar).length;
  if (m < 2) return undefined;
  return `${m} tests in this run: each p is shown raw and Holm-adjusted over the ${m} (family-wise error at 5%); a sweep's cells are separate families, not adjusted across each other.`;
}
