import { parseJsonObject } from '../structured.js';
import type { Scorer } from '../schema.js';
import { asText, extract, lastNumber, normalise, normaliseExpected } from './normalise.js';

/** A score in [0, 1], or null when the item cannot be scored (no reference), with what was compared. */
export interface ScoreResult { score: number | null; extracted?: string; error?: string }

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Score one answer with a scorer that needs no model and no process (exact, contains, regex,
 * numeric, json_field). `expected` is the item's reference.
 */
export function scorePure(s: Exclude<Scorer, { type: 'judge' | 'exec' }>, answer: string, expected: unknown): ScoreResult {
  const ref = s.type === 'json_field' && s.expected !== undefined ? s.expected : expected;
  if (ref === undefined || ref === null) return { score: null, error: 'the item has no expected answer' };
  switch (s.type) {
    case 'exact': {
      const got = normalise(extract(answer, s), s);
      return { score: got === normaliseExpected(ref, s) ? 1 : 0, extracted: got };
    }
    case 'contains': {
      const want = normaliseExpected(ref, s);
      const got = normalise(extract(answer, s), s);
      // An empty reference is contained in everything: it proves nothing, so it scores 0.
      if (!want) return { score: 0, extracted: got, error: 'empty expected answer' };
      return { score: got.includes(want) ? 1 : 0, extracted: got };
    }
    case 'regex': {
      const re = new RegExp(s.pattern.replaceAll('{{expected}}', escapeRe(asText(ref))), s.flags);
      const got = regexAnswer(s, answer);
      return { score: re.test(answer) ? 1 : 0, ...(got !== undefined ? { extracted: got } : { error: 'the answer pattern found nothing' }) };
    }
    case 'numeric': {
      const want = typeof ref === 'number' ? ref : lastNumber(asText(ref));
      if (want === undefined) return { score: null, error: `expected answer ${JSON.stringify(ref)} is not a number` };
      const got = lastNumber(answer);
      if (got === undefined) return { score: 0, error: 'no number in the answer' };
      return { score: Math.abs(got - want) <= Math.max(s.tolerance, s.relative * Math.abs(want)) ? 1 : 0, extracted: String(got) };
    }
    case 'json_field': {
      const obj = parseJsonObject(answer);
      if (!obj) return { score: 0, error: 'no JSON object in the answer' };
      const got = at(obj, s.path);
      if (got === undefined) return { score: 0, error: `no field ${s.path}` };
      return { score: same(got, ref) ? 1 : 0, extracted: asText(got) };
    }
  }
}

/** The value at a dotted path (`a.b.0`). */
function at(o: unknown, path: string): unknown {
  let v = o;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = Array.isArray(v) ? v[Number(part)] : (v as Record<string, unknown>)[part];
  }
  return v;
}

/** Numbers compare as numbers ("42" equals 42), strings trimmed and case-folded, the rest structurally. */
function same(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' || typeof b === 'number') {
    const x = Number(a), y = Number(b);
    return Number.isFinite(x) && Number.isFinite(y) && x === y && asText(a).trim() !== '' && asText(b).trim() !== '';
  }
  if (typeof a === 'string' && typeof b === 'string') return a.trim().toLowerCase() === b.trim().toLowerCase();
  return canonical(a) === canonical(b);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

/** One word or number where a regex scorer's pattern says `{{expected}}`. */
const ANY_ANSWER = '([\\w]+(?:[.,]\\d+)*)';

/**
 * A regex scorer's reading of an answer, without the reference: the last match of `answer` (or of
 * `pattern` with `{{expected}}` read as any one word or number), its first group, else the whole match.
 */
export function regexAnswer(s: Extract<Scorer, { type: 'regex' }>, answer: string): string | undefined {
  const src = s.answer ?? s.pattern.replaceAll('{{expected}}', ANY_ANSWER);
  const flags = s.answer ? 'g' : `${s.flags.replace('g', '')}g`;
  let re: RegExp;
  // The derived pattern can be invalid where `{{expected}}` sat inside a class or a quantifier.
  try { re = new RegExp(src, flags); } catch { return undefined; }
  let last: RegExpExecArray | undefined;
  for (const m of answer.matchAll(re)) last = m;
  if (!last) return undefined;
  return last.slice(1).find((g) => g !== undefined) ?? last[0];
}

/**
 * What votes compare: the scorer's extracted answer, never the whole text (wording differs between
 * agents). exact, contains: the normalised extract (whole, last line, last number, after a marker);
 * numeric: the last number; json_field: the field's value; regex: `regexAnswer`; judge and exec: their
 * own `extract` (default the last non-empty line), normalised. Empty when nothing was extracted.
 */
export function voteKey(s: Scorer | undefined, answer: string): string {
  if (!s) return normalise(answer, {});
  if (s.type === 'regex') { const a = regexAnswer(s, answer); return a === undefined ? '' : normalise(a, {}); }
  if (s.type === 'numeric') { const n = lastNumber(answer); return n === undefined ? '' : String(n); }
  if (s.type === 'json_field') { const o = parseJsonObject(answer); const v = o ? at(o, s.path) : undefined; return v === undefined ? '' : canonical(v); }
  return normalise(extract(answer, s), s);
}

/** A grader's verdict as a score: correct 1, partly 0.5, incorrect 0; undefined when it does not parse. */
export function gradeOf(text: string): number | undefined {
  const v = parseJsonObject(text)?.verdict;
  if (typeof v !== 'string') return undefined;
  return ({ correct: 1, partly: 0.5, incorrect: 0 } as Record<string, number>)[v.trim().toLowerCase()];
}
