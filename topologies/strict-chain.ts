import { clip, failure, task } from './common.js';
import { CHAIN_SCHEMA, ChainTurn, parseWith } from './structured.js';
import type { Topology } from './types.js';

const stagePrompt = (job: string) => `You are the ${job} of a strict compliance chain.
Input:
{{previous}}
If the input must not go further, reply {"action": "STOP", "reason": "why", "output": ""}.
Otherwise reply {"action": "CONTINUE", "reason": "", "output": "the input, processed"}.`;

/**
 * `strict-chain`: scanner -> anonymizer -> validator -> auditor (configurable). Every stage answers
 * CONTINUE with its output, or STOP, which halts the chain at once and records why. Fail-closed:
 * a failed stage or an unparseable answer stops the chain too. Node ids: `chain/<i>-<stage>`.
 */
export const strictChain: Topology = {
  name: 'strict-chain',
  roles: (e) => [...e.chain.stages],
  defaults: {
    scanner: { prompt: stagePrompt('scanner: flag secrets and personal data'), json_schema: CHAIN_SCHEMA },
    anonymizer: { prompt: stagePrompt('anonymizer: replace personal data with placeholders'), json_schema: CHAIN_SCHEMA },
    validator: { prompt: stagePrompt('validator: check that no personal data is left'), json_schema: CHAIN_SCHEMA },
    auditor: { prompt: stagePrompt('auditor: approve the result for release'), json_schema: CHAIN_SCHEMA },
  },
  next(spec, results, skip) {
    const stages = spec.experiment.chain.stages;
    let previous = spec.inputs.text;
    const trail: { stage: string; action: string; reason: string }[] = [];
    for (let i = 0; i < stages.length; i++) {
      const stage = stages[i]!;
      const node = `chain/${i}-${stage}`;
      const r = results.get(node);
      if (!r) return { tasks: skip?.has(node) ? [] : [task(spec, stage, node, { previous, stage, index: i }, i > 0 ? [`chain/${i - 1}-${stages[i - 1]}`] : [])] };
      const stop = (reason: string) => ({
        tasks: [], done: { output: '', verdict: 'stopped', reason: `STOP at ${stage} (stage ${i + 1} of ${stages.length}): ${reason}`, details: { stopped_at: stage, node, trail: [...trail, { stage, action: 'STOP', reason }] } },
      });
      if (!r.ok) return stop(failure(node, r));
      const t = parseWith(ChainTurn, r.text);
      if (!t) return stop(`unparseable answer: ${clip(r.text, 120)}`);
      if (t.action === 'STOP') return stop(t.reason || 'no reason given');
      trail.push({ stage, action: 'CONTINUE', reason: t.reason });
      previous = t.output;
    }
    return { tasks: [], done: { output: previous, verdict: 'passed', reason: `all ${stages.length} stages passed`, details: { trail } } };
  },
};
