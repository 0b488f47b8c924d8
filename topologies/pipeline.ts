import { clip, failure, task } from './common.js';
import { VERDICT_SCHEMA, Verdict, parseWith } from './structured.js';
import type { NodeTask, SpecIssue, Topology } from './types.js';

const gatePrompt = (what: string) => `You check a solution for ${what}.
Task: {{input}}
Solution: {{work}}
Reply with JSON {"verdict": "approve" or "reject", "feedback": "what to fix"}.`;

/**
 * `pipeline`: stages in order; a gate stage approves or rejects with feedback, and a rejection sends
 * the work back to an earlier stage for another round, at most `limits.rounds` rounds in all.
 * Node ids: `pipeline/r<round>/<stage>`.
 */
export const pipeline: Topology = {
  name: 'pipeline',
  roles: (e) => [...e.pipeline.stages],
  defaults: {
    thinker: { prompt: 'Task: {{input}}\nThink it through and write a short plan.' },
    worker: { prompt: 'Task: {{input}}\nPlan: {{thinker}}\n{{feedback}}\nWrite the solution.' },
    typeguard: { prompt: gatePrompt('type errors'), json_schema: VERDICT_SCHEMA },
    tester: { prompt: gatePrompt('failing tests'), json_schema: VERDICT_SCHEMA },
    reviewer: { prompt: gatePrompt('quality and correctness'), json_schema: VERDICT_SCHEMA },
  },
  check(e) {
    const issues: SpecIssue[] = [];
    const stages = e.pipeline.stages;
    if (new Set(stages).size !== stages.length) issues.push({ path: ['pipeline', 'stages'], message: 'stage names must be unique' });
    for (const [gate, back] of Object.entries(e.pipeline.gates)) {
      const gi = stages.indexOf(gate), bi = stages.indexOf(back);
      if (gi < 0) issues.push({ path: ['pipeline', 'gates', gate], message: `"${gate}" is not a stage` });
      else if (bi < 0 || bi >= gi) issues.push({ path: ['pipeline', 'gates', gate], message: `a gate sends work back to an earlier stage; "${back}" is not before "${gate}"` });
      else if (e.pipeline.gates[back] !== undefined) issues.push({ path: ['pipeline', 'gates', gate], message: `cannot send work back to "${back}": it is a gate` });
    }
    if (stages.every((s) => e.pipeline.gates[s] !== undefined)) issues.push({ path: ['pipeline', 'stages'], message: 'at least one stage must produce work (not be a gate)' });
    return issues;
  },
  next(spec, results, skip) {
    const { stages, gates } = spec.experiment.pipeline;
    const maxRounds = spec.experiment.limits.rounds;
    const outputs: Record<string, string> = {};
    const history: { round: number; gate: string; feedback: string }[] = [];
    let round = 1, i = 0, feedback = '', work = '', prev: string | undefined;
    for (;;) {
      const stage = stages[i]!;
      const node = `pipeline/r${round}/${stage}`;
      const r = results.get(node);
      if (!r) {
        const t: NodeTask = task(spec, stage, node, { ...outputs, round, feedback: feedback ? `Feedback from review: ${feedback}` : '', previous: work, work }, prev ? [prev] : []);
        return { tasks: skip?.has(node) ? [] : [t] };
      }
      prev = node;
      if (!r.ok) return { tasks: [], done: { output: work, verdict: 'failed', reason: failure(node, r), details: { rounds: round, history } } };
      const back = gates[stage];
      if (back !== undefined) {
        const v = parseWith(Verdict, r.text);
        // Garbage from a gate counts as a rejection: nothing passes a check it did not make.
        const rejected = !v || v.verdict === 'reject';
        if (rejected) {
          const fb = v ? v.feedback : `unparseable verdict: ${clip(r.text, 120)}`;
          history.push({ round, gate: stage, feedback: fb });
          if (round >= maxRounds) {
            return { tasks: [], done: { output: work, verdict: 'rejected', reason: `${stage} rejected in round ${round}; feedback rounds exhausted (${maxRounds})`, details: { rounds: round, history } } };
          }
          round++;
          i = stages.indexOf(back);
          feedback = fb;
          continue;
        }
      } else {
        outputs[stage] = r.text;
        work = r.text;
      }
      if (++i >= stages.length) return { tasks: [], done: { output: work, verdict: 'approved', reason: `approved in round ${round}`, details: { rounds: round, history } } };
    }
  },
};
