/** How an answer and a reference are made comparable. */
export interface NormaliseOptions {
  case_sensitive?: boolean;
  strip_punctuation?: boolean;
  extract?: 'whole' | 'last_line' | 'last_number';
  after?: string;
}

const NUMBER = /[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+/g;

/** The last number in a text ("1,234.5" reads as 1234.5), or undefined when there is none. */
export function lastNumber(text: string): number | undefined {
  const all = text.match(NUMBER);
  if (!all) return undefined;
  const n = Number(all.at(-1)!.replaceAll(',', ''));
  return Number.isFinite(n) ? n : undefined;
}

/** A reference answer as text (numbers and JSON values too). */
export function asText(v: unknown): string {
  if (v === undefined || v === null) return '';
  return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
}

/** The part of an answer that is compared (after the marker, last line, last number). */
export function extract(answer: string, o: NormaliseOptions): string {
  let t = answer;
  if (o.after) {
    const i = t.lastIndexOf(o.after);
    if (i >= 0) t = t.slice(i + o.after.length);
  }
  if (o.extract === 'last_line') t = t.split('\n').map((l) => l.trim()).filter(Boolean).at(-1) ?? '';
  else if (o.extract === 'last_number') { const n = lastNumber(t); t = n === undefined ? '' : String(n); }
  return t;
}

/** Case-fold, drop punctuation if asked, collapse whitespace, trim. */
export function normalise(text: string, o: NormaliseOptions): string {
  let t = text.normalize('NFKC');
  if (!o.case_sensitive) t = t.toLowerCase();
  if (o.strip_punctuation) t = t.replace(/[\p{P}\p{S}]/gu, ' ');
  return t.replace(/\s+/g, ' ').trim();
}

/** A reference normalised the same way; a numeric one compares as its canonical number under last_number. */
export function normaliseExpected(expected: unknown, o: NormaliseOptions): string {
  const t = asText(expected);
  if (o.extract === 'last_number') { const n = lastNumber(t); return n === undefined ? normalise(t, o) : String(n); }
  return normalise(t, o);
}
