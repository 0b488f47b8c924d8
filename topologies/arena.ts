import { failure, task } from './common.js';
import { agreement } from './kappa.js';
import { PAIRWISE_SCHEMA, Pairwise, parseScores, parseWith, rubricSchema } from './structured.js';
import type { NodeResult, NodeTask, RunSpec, SpecIssue, Step, Topology } from './types.js';

/**
 * `arena`: N contestants (`roles.contestant.agents`) solve alone; then J judges (`roles.judge.agents`)
 * score them, by rubric (one score per contestant) or pairwise (A or B for every pair). The winner
 * has the best mean score (or most pairwise wins; ties go to the lower index), and the judges'
 * agreement is Cohen's kappa for two judges, Fleiss' for more.
 * Node ids: `arena/c<i>`, `arena/judge/<j>` (rubric) or `arena/judge/<j>/<a>v<b>` (pairwise).
 */
export const arena: Topology = {
  name: 'arena',
  roles: () => ['contestant', 'judge'],
  defaults: {
    contestant: { prompt: 'Task: {{input}}\nSolve it.' },
    judge: {
      prompt: 'Task: {{input}}\nJudge the answers by {{rubric}}.\n{{candidates}}\n{{instruction}}',
    },
  },
  check(e) {
    const issues: SpecIssue[] = [];
    const [min, max] = e.arena.scale;
    if (min >= max) issues.push({ path: ['arena', 'scale'], message: 'scale is [min, max] with min < max' });
    if ((e.roles.contestant?.agents ?? 1) < 2) issues.push({ path: ['roles', 'contestant', 'agents'], message: 'an arena needs at least 2 contestants' });
    return issues;
  },
  next(spec, results, skip) {
    const n = spec.experiment.roles.contestant?.agents ?? 2;
    const tasks: NodeTask[] = [];
    const answers: NodeResult[] = [];
    for (let i = 0; i < n; i++) {
      const r = results.get(`arena/c${i}`);
      if (!r) { if (!skip?.has(`arena/c${i}`)) tasks.push(task(spec, 'contestant', `arena/c${i}`, { index: i })); }
      else answers.push(r);
    }
    if (answers.length < n) return { tasks };
    if (answers.every((a) => !a.ok)) return { tasks: [], done: { output: '', verdict: 'failed', reason: 'every contestant failed' } };
    return spec.experiment.arena.mode === 'pairwise' ? pairwise(spec, results, answers, skip) : rubric(spec, results, answers, skip);
  },
};

const shown = (a: NodeResult, i: number) => (a.ok ? a.text : `[${failure(`arena/c${i}`, a)}]`);

function rubric(spec: RunSpec, results: ReadonlyMap<string, NodeResult>, answers: NodeResult[], skip?: { has(node: string): boolean }): Step {
  const n = answers.length;
  const j = spec.experiment.roles.judge?.agents ?? 2;
  const [min, max] = spec.experiment.arena.scale;
  const candidates = answers.map((a, i) => `Answer ${i + 1}:\n${shown(a, i)}`).join('\n\n');
  const schema = spec.experiment.roles.judge?.json_schema ?? rubricSchema(n, min, max);
  const tasks: NodeTask[] = [];
  const ratings: (number[] | undefined)[] = [];
  let waiting = false;
  for (let k = 0; k < j; k++) {
    const node = `arena/judge/${k}`;
    const r = results.get(node);
    const instruction = `Reply with JSON {"scores": [one integer from ${min} to ${max} per answer, in order]}.`;
    if (!r) { waiting = true; if (!skip?.has(node)) tasks.push({ ...task(spec, 'judge', node, { candidates, rubric: spec.experiment.arena.rubric, min, max, n, instruction }, answers.map((_, i) => `arena/c${i}`)), json_schema: schema }); }
    else ratings.push(r.ok ? parseScores(r.text, n, min, max) : undefined);
  }
  if (waiting) return { tasks };
  const valid = ratings.filter((r): r is number[] => r !== undefined);
  const means = answers.map((_, i) => (valid.length ? valid.reduce((s, r) => s + r[i]!, 0) / valid.length : 0));
  const ag = agreement(valid);
  return finish(answers, means, { mode: 'rubric', scores: valid, means, judges: j, judges_invalid: j - valid.length, ...kappaOf(ag) }, valid.length);
}

function pairwise(spec: RunSpec, results: ReadonlyMap<string, NodeResult>, answers: NodeResult[], skip?: { has(node: string): boolean }): Step {
  const n = answers.length;
  const j = spec.experiment.roles.judge?.agents ?? 2;
  const pairs: [number, number][] = [];
  for (let a = 0; a < n; a++) for (let b = a + 1; b < n; b++) pairs.push([a, b]);
  const tasks: NodeTask[] = [];
  const ratings: ('A' | 'B' | undefined)[][] = [];
  let waiting = false;
  for (let k = 0; k < j; k++) {
    const row: ('A' | 'B' | undefined)[] = [];
    for (const [a, b] of pairs) {
      const node = `arena/judge/${k}/${a}v${b}`;
      const r = results.get(node);
      if (!r) {
        waiting = true;
        if (skip?.has(node)) continue;
        const candidates = `Answer A:\n${shown(answers[a]!, a)}\n\nAnswer B:\n${shown(answers[b]!, b)}`;
        const instruction = 'Reply with JSON {"winner": "A" or "B"}.';
        tasks.push({ ...task(spec, 'judge', node, { candidates, rubric: spec.experiment.arena.rubric, a, b, instruction }, [`arena/c${a}`, `arena/c${b}`]), json_schema: spec.experiment.roles.judge?.json_schema ?? PAIRWISE_SCHEMA });
        continue;
      }
      row.push(r.ok ? (parseWith(Pairwise, r.text)?.winner as 'A' | 'B' | undefined) : undefined);
    }
    ratings.push(row);
  }
  if (waiting) return { tasks };
  const wins = answers.map(() => 0);
  let counted = 0;
  for (const row of ratings) row.forEach((w, p) => { if (w) { counted++; wins[w === 'A' ? pairs[p]![0] : pairs[p]![1]]!++; } });
  const ag = agreement(ratings);
  return finish(answers, wins, { mode: 'pairwise', pairs, ratings, wins, judges: j, ...kappaOf(ag) }, counted);
}

function kappaOf(ag: ReturnType<typeof agreement>) {
  return { kappa: ag.kappa, kappa_method: ag.method };
}

function finish(answers: NodeResult[], score: number[], details: Record<string, unknown>, votes: number): Step {
  if (votes === 0) return { tasks: [], done: { output: '', verdict: 'no-verdict', reason: 'no judge gave a usable score', details } };
  let best = -1;
  for (let i = 0; i < answers.length; i++) if (answers[i]!.ok && (best < 0 || score[i]! > score[best]!)) best = i;
  return {
    tasks: [],
    done: { output: answers[best]!.text, verdict: 'winner', reason: `contestant ${best} won (${score[best]}${score.filter((x, i) => answers[i]!.ok && x === score[best]).length > 1 ? ', a tie broken by the lower index' : ''})`, details: { winner: best, winner_node: `arena/c${best}`, ...details } },
  };
}
