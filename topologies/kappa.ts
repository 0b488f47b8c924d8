/**
 * Inter-rater agreement. `ratings[r][i]` is rater r's category for item i (any string/number);
 * `undefined` means the rater did not rate the item, and such items are left out.
 * Both return null when kappa is undefined (every rating in one category: chance agreement is 1).
 */

type Cat = string | number;

/** Cohen's kappa for two raters. */
export function cohenKappa(a: readonly (Cat | undefined)[], b: readonly (Cat | undefined)[]): number | null {
  const pairs: [Cat, Cat][] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== undefined && b[i] !== undefined) pairs.push([a[i]!, b[i]!]);
  const n = pairs.length;
  if (n === 0) return null;
  const ca = new Map<Cat, number>(), cb = new Map<Cat, number>();
  let agree = 0;
  for (const [x, y] of pairs) {
    if (x === y) agree++;
    ca.set(x, (ca.get(x) ?? 0) + 1);
    cb.set(y, (cb.get(y) ?? 0) + 1);
  }
  const po = agree / n;
  let pe = 0;
  for (const [k, v] of ca) pe += (v / n) * ((cb.get(k) ?? 0) / n);
  return pe >= 1 ? null : (po - pe) / (1 - pe);
}

/** Fleiss' kappa for any number (>= 2) of raters; items not rated by every rater are left out. */
export function fleissKappa(ratings: readonly (readonly (Cat | undefined)[])[]): number | null {
  const raters = ratings.length;
  if (raters < 2) return null;
  const items = Math.min(...ratings.map((r) => r.length));
  const rows: Map<Cat, number>[] = [];
  for (let i = 0; i < items; i++) {
    if (ratings.some((r) => r[i] === undefined)) continue;
    const row = new Map<Cat, number>();
    for (const r of ratings) row.set(r[i]!, (row.get(r[i]!) ?? 0) + 1);
    rows.push(row);
  }
  const N = rows.length;
  if (N === 0) return null;
  const n = raters;
  const totals = new Map<Cat, number>();
  let pBar = 0;
  for (const row of rows) {
    let sq = 0;
    for (const [k, c] of row) { sq += c * c; totals.set(k, (totals.get(k) ?? 0) + c); }
    pBar += (sq - n) / (n * (n - 1));
  }
  pBar /= N;
  let pe = 0;
  for (const c of totals.values()) pe += (c / (N * n)) ** 2;
  return pe >= 1 ? null : (pBar - pe) / (1 - pe);
}

/** Cohen's kappa for two raters, Fleiss' for more; names which one it used. */
export function agreement(ratings: readonly (readonly (Cat | undefined)[])[]): { method: 'cohen' | 'fleiss' | 'none'; kappa: number | null } {
  if (ratings.length < 2) return { method: 'none', kappa: null };
  if (ratings.length === 2) return { method: 'cohen', kappa: cohenKappa(ratings[0]!, ratings[1]!) };
  return { method: 'fleiss', kappa: fleissKappa(ratings) };
}
