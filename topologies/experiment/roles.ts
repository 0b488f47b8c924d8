import { RoleSchema, type Experiment, type Role } from '../schema.js';
import type { RoleDefault } from '../types.js';

/** The grader's verdict: an enum, since grammar converters ignore numeric bounds. */
export const GRADE_SCHEMA = {
  type: 'object',
  properties: { verdict: { type: 'string', enum: ['correct', 'partly', 'incorrect'] } },
  required: ['verdict'],
};

/** Roles an experiment adds to its topology's: the baselines' agent and the judge scorer's grader. */
export const EXTRA_DEFAULTS: Record<string, RoleDefault> = {
  baseline: { prompt: '{{input}}' },
  grader: {
    prompt: 'Question: {{input}}\nReference answer: {{expected}}\nCandidate answer: {{answer}}\nIs the candidate answer correct? Reply with JSON {"verdict": "correct", "partly" or "incorrect"}.',
    json_schema: GRADE_SCHEMA,
  },
};

/** The extra roles this experiment uses. */
export function extraRoles(e: Pick<Experiment, 'baselines' | 'scorer'>): string[] {
  return [...(e.baselines.length ? ['baseline'] : []), ...(e.scorer?.type === 'judge' ? ['grader'] : [])];
}

/** The extra roles, filled in from their defaults like a topology's. */
export function resolveExtraRoles(e: Experiment): Record<string, Role> {
  const out: Record<string, Role> = {};
  for (const role of extraRoles(e)) {
    const d = EXTRA_DEFAULTS[role]!;
    const given = e.roles[role];
    out[role] = { ...RoleSchema.parse({}), ...(d.json_schema ? { json_schema: d.json_schema } : {}), ...given, prompt: given?.prompt ?? d.prompt } as Role;
  }
  return out;
}
