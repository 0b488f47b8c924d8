import type { Experiment, Scorer } from '../schema.js';
import { gradeOf, scoreExec, scorePure, type ScoreResult } from '../scorers/index.js';
import type { Results, RunDone, RunSpec } from '../types.js';
import { computedTokens, conditionsOf, type Budget, type UnitDone } from './conditions.js';
import { holm, paired, summarise, type Paired, type Summary } from './stats.js';

/** One condition's numbers over the items. */
export interface ConditionStats extends Summary {
  name: string;
  kind: 'topology' | 'baseline';
  /**
   * Mean compute per item, the grader's excluded: prompt tokens the engine evaluated plus output
   * tokens. Prompt tokens served from the engine's prefix cache are not compute (cached_per_item).
   */
  tokens_per_item: number;
  /** Prompt tokens evaluated per item (the receipts' tokens_in less tokens_cached). */
  prompt_tokens_per_item: number;
  /** Prompt tokens the engine already held (prefix cache) per item: not evaluated again. */
  cached_tokens_per_item: number;
  tokens_out_per_item: number;
  /** Mean wall time per item (first node submitted to last node finished, as the workers' receipts say). */
  wall_ms_per_item: number;
  nodes_per_item: number;
  /** Items whose unit ended without an answer (a failed node): scored 0, their error text never scored. */
  failed: number;
  /** Items without a score (no expected answer). */
  unscored: number;
  k?: number;
}

/** One item across conditions (answers clipped; the run folder's nodes.jsonl has them whole). */
export interface ItemRow {
  id: string;
  expected: string;
  input: string;
  cells: Record<string, { answer: string; score: number | null; extracted?: string; error?: string; node?: string; tokens: number }>;
}

/** What an experiment run adds to result.json (`details.experiment`). */
export interface ExperimentResult {
  scorer: string;
  items: number;
  /** The drivers that answered, as the workers' receipts name them (what ran, whatever the passport assumed). */
  drivers: string[];
  conditions: ConditionStats[];
  budget?: Budget;
  /** The topology against each baseline, on the items both scored; McNemar p-values Holm-adjusted over these. */
  comparisons: (Paired & { a: string; b: string })[];
  rows: ItemRow[];
}

const clip = (s: string, n = 240) => (s.length > n ? `${s.slice(0, n)}…` : s);
const EXEC_CONCURRENCY = 4;

/**
 * Score every unit of a finished experiment and compute its statistics: the run's `details` become
 * `{experiment: ExperimentResult}`. Exec scorers run here (bounded concurrency); the others are pure.
 */
export async function finishExperiment(spec: RunSpec, d: RunDone, results: Results): Promise<RunDone> {
  const e = spec.experiment, items = spec.inputs.dataset ?? [];
  if (!d.details?.units) return d; // refused before any unit ran
  const units = (d.details?.units as UnitDone[] | undefined) ?? [];
  const scorer: Scorer = e.scorer ?? { type: 'exact', case_sensitive: false, strip_punctuation: false, extract: 'whole' };
  const scores = new Map<string, ScoreResult>();
  const keyOf = (u: UnitDone) => `${u.cond}/${u.item}`;
  const queue = [...units];
  const worker = async (): Promise<void> => {
    for (let u = queue.shift(); u; u = queue.shift()) scores.set(keyOf(u), await scoreUnit(scorer, u, items[u.item]!, results, spec.inputs.base_dir));
  };
  await Promise.all(Array.from({ length: scorer.type === 'exec' ? EXEC_CONCURRENCY : 1 }, worker));

  const conds = conditionsOf(e);
  const cost = new Map(units.map((u) => [keyOf(u), tokensOf(results, u.nodes)]));
  const byCond = new Map<string, UnitDone[]>(conds.map((c) => [c, []]));
  for (const u of units) byCond.get(u.cond)?.push(u);
  const conditions = conds.map((name, ci) => condStats(e, name, byCond.get(name)!, scores, cost, ci));
  const scoreVec = (c: string) => items.map((_, i) => scores.get(`${c}/${i}`)?.score ?? null);
  const comparisons = conds.slice(1).map((b, bi) => {
    const a = scoreVec(e.topology), bv = scoreVec(b);
    const both = a.map((x, i) => (x !== null && bv[i] !== null ? i : -1)).filter((i) => i >= 0);
    return { a: e.topology, b, ...paired(both.map((i) => a[i]!), both.map((i) => bv[i]!), e.seed * 31 + 1000 + bi) };
  });
  // Several comparisons per run: each p beside its Holm adjustment over the run's family.
  const tested = comparisons.filter((c) => c.mcnemar);
  holm(tested.map((c) => c.mcnemar!.p)).forEach((p, i) => Object.assign(tested[i]!.mcnemar!, { p_holm: p, family: tested.length }));
  const unitOf = new Map(units.map((u) => [keyOf(u), u]));
  const rows: ItemRow[] = items.map((it, i) => ({
    id: it.id, expected: clip(asText(it.expected), 120), input: clip(it.input, 400),
    cells: Object.fromEntries(conds.map((c) => {
      const u = unitOf.get(`${c}/${i}`);
      const s = scores.get(`${c}/${i}`);
      return [c, { answer: clip(u?.answer ?? ''), score: s?.score ?? null, ...(s?.extracted !== undefined ? { extracted: clip(s.extracted, 80) } : {}), ...(s?.error ? { error: s.error } : {}), ...(u?.final ? { node: u.final } : {}), tokens: u ? cost.get(keyOf(u))!.total : 0 }];
    })),
  }));
  const drivers = new Set<string>();
  for (const u of units) for (const n of u.nodes) { const dr = results.get(n)?.receipt?.driver; if (dr) drivers.add(dr); }
  const budget = d.details?.budget ? spent(d.details.budget as Budget, e.topology, conditions) : undefined;
  const experiment: ExperimentResult = { scorer: scorer.type, items: items.length, drivers: [...drivers].sort(), conditions, ...(budget ? { budget } : {}), comparisons, rows };
  const head = conditions.map((c) => `${c.name} ${c.mean.toFixed(3)} ± ${c.se.toFixed(3)}`).join(', ');
  return { output: `${items.length} items: ${head}`, verdict: 'scored', reason: `scored with ${scorer.type}`, details: { experiment } };
}

function asText(v: unknown): string { return v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v); }

/**
 * The budget with what the votes spent beside what the topology spent, over the whole run: k is a
 * whole number (and capped at k_max), so the budgets differ, and the report says by how much.
 */
function spent(b: Budget, topo: string, conditions: ConditionStats[]): Budget {
  const t = conditions.find((c) => c.name === topo)?.tokens_per_item ?? NaN;
  const votes = conditions.filter((c) => c.name === 'majority_vote' || c.name === 'self_consistency')
    .map((c) => ({ condition: c.name, tokens_per_item: c.tokens_per_item, vs_topology: t > 0 ? c.tokens_per_item / t - 1 : NaN }));
  return { ...b, spent: { topology_per_item: t, votes } };
}

async function scoreUnit(s: Scorer, u: UnitDone, item: { expected?: unknown; id: string; fields: Record<string, unknown>; input: string }, results: Results, cwd?: string): Promise<ScoreResult> {
  if (u.verdict === 'failed') {
    const hasRef = item.expected !== undefined || s.type === 'exec' || (s.type === 'json_field' && s.expected !== undefined);
    return { score: hasRef ? 0 : null, error: `no answer: ${u.reason ?? 'a node failed'}` };
  }
  if (s.type === 'judge') {
    if (item.expected === undefined) return { score: null, error: 'the item has no expected answer' };
    const g = u.grade ? results.get(u.grade) : undefined;
    const score = g?.ok ? gradeOf(g.text) : undefined;
    return score === undefined ? { score: 0, error: g?.ok ? 'the grader gave no verdict' : 'the grader failed' } : { score, extracted: String(score) };
  }
  if (s.type === 'exec') return scoreExec(s.command, u.answer, { id: item.id, input: item.input, expected: item.expected, ...item.fields }, { cwd, timeout_ms: s.timeout_ms });
  return scorePure(s, u.answer, item.expected);
}

function tokensOf(results: Results, nodes: string[]): { total: number; prompt: number; cached: number; out: number; wall: number } {
  let total = 0, prompt = 0, cached = 0, out = 0, start = Infinity, end = -Infinity, dur = 0;
  for (const n of nodes) {
    const rc = results.get(n)?.receipt;
    if (!rc) continue;
    const t = computedTokens(rc);
    total += t.prompt + t.out; prompt += t.prompt; cached += t.cached;
    out += t.out;
    dur += rc.duration_ms ?? 0;
    if (rc.started_at !== undefined) start = Math.min(start, rc.started_at);
    if (rc.finished_at !== undefined) end = Math.max(end, rc.finished_at);
  }
  return { total, prompt, cached, out, wall: end >= start ? end - start : dur };
}

function condStats(e: Experiment, name: string, units: UnitDone[], scores: Map<string, ScoreResult>, cost: Map<string, ReturnType<typeof tokensOf>>, ci: number): ConditionStats {
  const xs: number[] = [];
  let tok = 0, prompt = 0, cached = 0, out = 0, wall = 0, nodes = 0, failed = 0, unscored = 0;
  for (const u of units) {
    const s = scores.get(`${u.cond}/${u.item}`)?.score;
    if (s === null || s === undefined) unscored++; else xs.push(s);
    const t = cost.get(`${u.cond}/${u.item}`)!;
    tok += t.total; prompt += t.prompt; cached += t.cached; out += t.out; wall += t.wall; nodes += u.nodes.length;
    if (u.verdict === 'failed') failed++;
  }
  const n = Math.max(1, units.length);
  const k = units.find((u) => u.k !== undefined)?.k;
  return {
    name, kind: name === e.topology ? 'topology' : 'baseline', ...summarise(xs, e.seed * 31 + ci),
    tokens_per_item: tok / n, prompt_tokens_per_item: prompt / n, cached_tokens_per_item: cached / n, tokens_out_per_item: out / n, wall_ms_per_item: wall / n, nodes_per_item: nodes / n, failed, unscored,
    ...(k !== undefined ? { k } : {}),
  };
}
