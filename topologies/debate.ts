import { clip, failure, task } from './common.js';
import { DEBATE_SCHEMA, DebateTurn, parseWith } from './structured.js';
import type { SpecIssue, Topology } from './types.js';

interface Turn { stance: string; verdict: 'continue' | 'drift' | 'approve'; argument: string; parsed: boolean; ok: boolean }

/**
 * `diamond-debate`: a proposer, K debaters (one per stance) over at most R rounds, each round seeing
 * the others' arguments of the round before, then a merger. Hard termination (seed 003):
 * - approve: every debater approves in a round -> the merger runs at once;
 * - drift: a majority flags drift in `limits.drift_cap` consecutive rounds -> abort;
 * - turn cap: the next round (plus the merger) would pass `limits.turns` -> abort;
 * - R rounds without consensus -> the merger runs, verdict `no-consensus`.
 * Node ids: `debate/propose`, `debate/r<round>/<stance>`, `debate/merge`.
 */
export const debate: Topology = {
  name: 'diamond-debate',
  roles: () => ['proposer', 'debater', 'merger'],
  defaults: {
    proposer: { prompt: 'Task: {{input}}\nPropose a solution.' },
    debater: {
      prompt: 'Task: {{input}}\nProposal: {{proposal}}\nYou argue for a {{stance}} solution. Round {{round}}.\nOther arguments so far:\n{{arguments}}\nReply with JSON {"verdict": "continue", "drift" or "approve", "argument": "your argument"}.',
      json_schema: DEBATE_SCHEMA,
    },
    merger: { prompt: 'Task: {{input}}\nProposal: {{proposal}}\nArguments:\n{{arguments}}\nMerge them into one final solution.' },
  },
  check(e) {
    const issues: SpecIssue[] = [];
    if (new Set(e.debate.stances).size !== e.debate.stances.length) issues.push({ path: ['debate', 'stances'], message: 'stances must be unique' });
    return issues;
  },
  next(spec, results, skip) {
    const { stances } = spec.experiment.debate;
    const { rounds, turns, drift_cap: driftCap } = spec.experiment.limits;
    const k = stances.length;
    const prop = results.get('debate/propose');
    if (!prop) return { tasks: skip?.has('debate/propose') ? [] : [task(spec, 'proposer', 'debate/propose', {})] };
    if (!prop.ok) return abort('', `proposer failed: ${failure('debate/propose', prop)}`, 0, 1, 0);
    const proposal = prop.text;
    let used = 1, driftStreak = 0, parseFailures = 0;
    let last: Turn[] = [];
    let lastNodes = ['debate/propose'];
    let outcome: { verdict: string; reason: string } | undefined;
    const all: { round: number; turns: Turn[] }[] = [];
    for (let round = 1; round <= rounds && !outcome; round++) {
      if (used + k + 1 > turns) {
        return abort(proposal, `turn cap: round ${round} needs ${k} more turns plus the merger; ${used} of ${turns} used`, round - 1, used, parseFailures, all);
      }
      const args = format(last);
      const cur: Turn[] = [];
      const tasks = [];
      let waiting = false;
      for (const stance of stances) {
        const node = `debate/r${round}/${stance}`;
        const r = results.get(node);
        if (!r) { waiting = true; if (!skip?.has(node)) tasks.push(task(spec, 'debater', node, { proposal, stance, round, arguments: args }, lastNodes)); continue; }
        const t = r.ok ? parseWith(DebateTurn, r.text) : undefined;
        if (!t) parseFailures++;
        cur.push(t
          ? { stance, verdict: t.verdict as Turn['verdict'], argument: t.argument, parsed: true, ok: true }
          : { stance, verdict: 'continue', argument: r.ok ? clip(r.text, 2000) : failure(node, r), parsed: false, ok: r.ok });
      }
      if (waiting) return { tasks };
      used += k;
      all.push({ round, turns: cur });
      last = cur;
      lastNodes = stances.map((s) => `debate/r${round}/${s}`);
      if (cur.every((t) => t.verdict === 'approve')) outcome = { verdict: 'approved', reason: `every debater approved in round ${round}` };
      else if (cur.filter((t) => t.verdict === 'drift').length * 2 > k) {
        if (++driftStreak >= driftCap) return abort(proposal, `drift cap: a majority flagged drift in ${driftStreak} consecutive rounds (cap ${driftCap})`, round, used, parseFailures, all);
      } else driftStreak = 0;
    }
    outcome ??= { verdict: 'no-consensus', reason: `${rounds} rounds without every debater approving` };
    const merge = results.get('debate/merge');
    const history = all.flatMap((r) => r.turns.map((t) => `[round ${r.round}] ${t.stance}: ${t.argument}`)).join('\n');
    if (!merge) return { tasks: skip?.has('debate/merge') ? [] : [task(spec, 'merger', 'debate/merge', { proposal, arguments: history }, lastNodes)] };
    used++;
    const details = { rounds: all.length, turns_used: used, parse_failures: parseFailures, transcript: all };
    if (!merge.ok) return { tasks: [], done: { output: proposal, verdict: 'failed', reason: failure('debate/merge', merge), details } };
    return { tasks: [], done: { output: merge.text, verdict: outcome.verdict, reason: outcome.reason, details } };
  },
};

function format(turns: Turn[]): string {
  return turns.length ? turns.map((t) => `${t.stance}: ${t.argument}`).join('\n') : '(none yet)';
}

function abort(output: string, reason: string, rounds: number, used: number, parseFailures: number, transcript: unknown[] = []) {
  return { tasks: [], done: { output, verdict: 'aborted', reason, details: { rounds, turns_used: used, parse_failures: parseFailures, transcript } } };
}
