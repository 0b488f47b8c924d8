import type { Experiment, Scorer } from '../schema.js';
import { gradeOf, scoreExec, scorePure, type ScoreResult } from '../scorers/index.js';
import type { Results, RunDone, RunSpec } from '../types.js';
import { conditionsOf, type Budget, type UnitDone } from './conditions.js';
import { paired, summarise, type Paired, type Summary } from './stats.js';

/** One condition's numbers over the items. */
export interface ConditionStats extends Summary {
  name: string;
  kind: 'topology' | 'baseline';
  /** Mean tokens (prompt + output) per item, the grader's excluded. */
  tokens_per_item: number;
  tokens_out_per_item: number;
  /** Mean wall time per item (first node submitted to last node finished, as the workers' receipts say). */
  wall_ms_per_item: number;
  nodes_per_item: number;
  /** Items whose unit ended without an answer (failed nodes): scored as wrong. */
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
  /** The topology against each baseline, on the items both scored. */
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
  const experiment: ExperimentResult = { scorer: scorer.type, items: items.length, drivers: [...drivers].sort(), conditions, ...(d.details?.budget ? { budget: d.details.budget as Budget } : {}), comparisons, rows };
  const head = conditions.map((c) => `${c.name} ${c.mean.toFixed(3)} ± ${c.se.toFixed(3)}`).join(', ');
  return { output: `${items.length} items: ${head}`, verdict: 'scored', reason: `scored with ${scorer.type}`, details: { experiment } };
}

function asText(v: unknown): string { return v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v); }

async function scoreUnit(s: Scorer, u: UnitDone, item: { expected?: unknown; id: string; fields: Record<string, unknown>; input: string }, results: Results, cwd?: string): Promise<ScoreResult> {
  if (s.type === 'judge') {
    if (item.expected === undefined) return { score: null, error: 'the item has no expected answer' };
    const g = u.grade ? results.get(u.grade) : undefined;
    const score = g?.ok ? gradeOf(g.text) : undefined;
    return score === undefined ? { score: 0, error: g?.ok ? 'the grader gave no verdict' : 'the grader failed' } : { score, extracted: String(score) };
  }
  if (s.type === 'exec') return scoreExec(s.command, u.answer, { id: item.id, input: item.input, expected: item.expected, ...item.fields }, { cwd, timeout_ms: s.timeout_ms });
  return scorePure(s, u.answer, item.expected);
}

function tokensOf(results: Results, nodes: string[]): { total: number; out: number; wall: number } {
  let total = 0, out = 0, start = Infinity, end = -Infinity, dur = 0;
  for (const n of nodes) {
    const rc = results.get(n)?.receipt;
    if (!rc) continue;
    total += (rc.tokens_in ?? 0) + (rc.tokens_out ?? 0);
    out += rc.tokens_out ?? 0;
    dur += rc.duration_ms ?? 0;
    if (rc.started_at !== undefined) start = Math.min(start, rc.started_at);
    if (rc.finished_at !== undefined) end = Math.max(end, rc.finished_at);
  }
  return { total, out, wall: end >= start ? end - start : dur };
}

function condStats(e: Experiment, name: string, units: UnitDone[], scores: Map<string, ScoreResult>, cost: Map<string, ReturnType<typeof tokensOf>>, ci: number): ConditionStats {
  const xs: number[] = [];
  let tok = 0, out = 0, wall = 0, nodes = 0, failed = 0, unscored = 0;
  for (const u of units) {
    const s = scores.get(`${u.cond}/${u.item}`)?.score;
    if (s === null || s === undefined) unscored++; else xs.push(s);
    const t = cost.get(`${u.cond}/${u.item}`)!;
    tok += t.total; out += t.out; wall += t.wall; nodes += u.nodes.length;
    if (u.verdict === 'failed') failed++;
  }
  const n = Math.max(1, units.length);
  const k = units.find((u) => u.k !== undefined)?.k;
  return {
    name, kind: name === e.topology ? 'topology' : 'baseline', ...summarise(xs, e.seed * 31 + ci),
    tokens_per_item: tok / n, tokens_out_per_item: out / n, wall_ms_per_item: wall / n, nodes_per_item: nodes / n, failed, unscored,
    ...(k !== undefined ? { k } : {}),
  };
}
