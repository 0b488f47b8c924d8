import { z } from 'zod';

/**
 * Structured outputs: the JSON schemas sent with constrained-output roles, and defensive parsers.
 * A model that emits garbage yields `undefined` (the topology records it), never an exception.
 */

/** Parse the first JSON object in `text` (models wrap JSON in prose or code fences). */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  const t = text.trim();
  const attempt = (s: string): Record<string, unknown> | undefined => {
    try {
      const v = JSON.parse(s) as unknown;
      return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
    } catch { return undefined; }
  };
  const whole = attempt(t);
  if (whole) return whole;
  const start = t.indexOf('{');
  if (start < 0) return undefined;
  // Scan for the matching close brace, respecting strings, so trailing prose is ignored.
  let depth = 0, inStr = false, esc = false;
  for (let i = start; i < t.length && i < start + 1_000_000; i++) {
    const c = t[i];
    if (inStr) { if (esc) esc = false; else if (c === '\\') esc = true; else if (c === '"') inStr = false; continue; }
    if (c === '"') inStr = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return attempt(t.slice(start, i + 1));
  }
  return undefined;
}

const lower = (allowed: readonly string[]) => z.string().transform((s) => s.trim().toLowerCase()).pipe(z.enum(allowed as [string, ...string[]]));

/** Parse `text` as JSON and validate it; undefined when either fails. */
export function parseWith<T>(schema: z.ZodType<T>, text: string): T | undefined {
  const obj = parseJsonObject(text);
  if (!obj) return undefined;
  const r = schema.safeParse(obj);
  return r.success ? r.data : undefined;
}

/** A gate's verdict (pipeline gates, the map-reduce guard). */
export const Verdict = z.object({ verdict: lower(['approve', 'reject']), feedback: z.string().default('') });
export const VERDICT_SCHEMA = {
  type: 'object',
  properties: { verdict: { type: 'string', enum: ['approve', 'reject'] }, feedback: { type: 'string' } },
  required: ['verdict', 'feedback'],
};

/** A debater's turn. */
export const DebateTurn = z.object({ verdict: lower(['continue', 'drift', 'approve']), argument: z.string().default('') });
export const DEBATE_SCHEMA = {
  type: 'object',
  properties: { verdict: { type: 'string', enum: ['continue', 'drift', 'approve'] }, argument: { type: 'string' } },
  required: ['verdict', 'argument'],
};

/** A strict-chain stage: pass its output on, or STOP the chain. */
export const ChainTurn = z.object({
  action: z.string().transform((s) => s.trim().toUpperCase()).pipe(z.enum(['CONTINUE', 'STOP'])),
  reason: z.string().default(''),
  output: z.string().default(''),
});
export const CHAIN_SCHEMA = {
  type: 'object',
  properties: { action: { type: 'string', enum: ['CONTINUE', 'STOP'] }, reason: { type: 'string' }, output: { type: 'string' } },
  required: ['action', 'reason', 'output'],
};

/** A map-reduce guard's check of the final output. */
export const GuardVerdict = z.object({ verdict: lower(['pass', 'fail']), reason: z.string().default('') });
export const GUARD_SCHEMA = {
  type: 'object',
  properties: { verdict: { type: 'string', enum: ['pass', 'fail'] }, reason: { type: 'string' } },
  required: ['verdict', 'reason'],
};

/** A rubric judge scores every contestant: integers in the scale. */
export function rubricSchema(n: number, min: number, max: number): Record<string, unknown> {
  // An enum, not minimum/maximum: grammar converters (node-llama-cpp's among them) ignore numeric bounds.
  const scale = max - min <= 100 ? { enum: Array.from({ length: max - min + 1 }, (_, i) => min + i) } : { type: 'integer' };
  return {
    type: 'object',
    properties: { scores: { type: 'array', items: scale, minItems: n, maxItems: n } },
    required: ['scores'],
  };
}
export function parseScores(text: string, n: number, min: number, max: number): number[] | undefined {
  const s = z.object({ scores: z.array(z.number().int().min(min).max(max)).length(n) });
  return parseWith(s, text)?.scores;
}

/** A pairwise judge picks A or B. */
export const Pairwise = z.object({ winner: z.string().transform((s) => s.trim().toUpperCase()).pipe(z.enum(['A', 'B'])) });
export const PAIRWISE_SCHEMA = {
  type: 'object', properties: { winner: { type: 'string', enum: ['A', 'B'] } }, required: ['winner'],
};
