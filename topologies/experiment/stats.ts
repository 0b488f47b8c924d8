import { rng } from './dataset.js';

/**
 * Mean, standard error and a 95% interval of per-item scores: Clopper-Pearson (exact binomial) when
 * every score is 0 or 1, which holds its coverage at all-right and all-wrong; else a seeded
 * percentile bootstrap.
 */
export interface Summary { n: number; mean: number; se: number; ci: [number, number]; binary: boolean; ci_method: 'clopper-pearson' | 'bootstrap' }

/** A comparison of two conditions on the same items (a − b). */
export interface Paired {
  n: number;
  mean_diff: number;
  se: number;
  /** Paired bootstrap (items resampled together), 95%. */
  ci: [number, number];
  /** For binary scores only: discordant pairs and McNemar's test. */
  mcnemar?: McNemar;
}

export interface McNemar {
  /** Items right under a and wrong under b. */
  b: number;
  /** Items wrong under a and right under b. */
  c: number;
  /** Items compared (concordant ones included): a p-value is never shown without it. */
  n: number;
  /** Holm-adjusted p over the comparisons of the same run (set by `holm`), beside the raw one. */
  p_holm?: number;
  /** How many comparisons the Holm adjustment spans. */
  family?: number;
  /** exact: two-sided binomial on b + c (used when b + c < 25); chi2: with continuity correction. */
  method: 'exact' | 'chi2';
  statistic?: number;
  p: number;
}

export const BOOTSTRAP_RESAMPLES = 2000;

export function mean(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return xs.length ? s / xs.length : NaN;
}

/** Standard error of the mean (sample standard deviation, n − 1); 0 for one item. */
export function stderr(xs: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return n === 1 ? 0 : NaN;
  const m = mean(xs);
  let ss = 0;
  for (const x of xs) ss += (x - m) ** 2;
  return Math.sqrt(ss / (n - 1) / n);
}

/** The q-quantile of sorted values (linear interpolation between order statistics, type 7). */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return NaN;
  const h = (sorted.length - 1) * q, lo = Math.floor(h), hi = Math.ceil(h);
  return sorted[lo]! + (h - lo) * (sorted[hi]! - sorted[lo]!);
}

/**
 * 95% percentile bootstrap interval of the mean, resampling with a seeded generator. Scores take few
 * distinct values (0/1, a grader's 0/0.5/1, paired differences -1/0/1): then a resample's counts of
 * each value are drawn directly (multinomial, as successive binomials by inversion), which is the
 * same distribution as drawing n items with replacement, at a cost independent of n.
 */
export function bootstrapCi(xs: readonly number[], seed: number, resamples = BOOTSTRAP_RESAMPLES): [number, number] {
  const n = xs.length;
  if (n === 0) return [NaN, NaN];
  const r = rng(seed);
  const means = new Float64Array(resamples);
  const counts = new Map<number, number>();
  for (const x of xs) { counts.set(x, (counts.get(x) ?? 0) + 1); if (counts.size > 8) break; }
  if (counts.size <= 8) {
    const vals = [...counts.keys()], ps = vals.map((v) => counts.get(v)! / n);
    const tables = new Map<string, Float64Array>();
    for (let b = 0; b < resamples; b++) {
      let rem = n, rest = 1, sum = 0;
      for (let j = 0; j < vals.length - 1 && rem > 0; j++) {
        const c = drawBinomial(rem, Math.min(1, ps[j]! / rest), r(), tables);
        sum += c * vals[j]!;
        rem -= c;
        rest -= ps[j]!;
      }
      sum += rem * vals.at(-1)!;
      means[b] = sum / n;
    }
  } else {
    for (let b = 0; b < resamples; b++) {
      let s = 0;
      for (let i = 0; i < n; i++) s += xs[(r() * n) | 0]!;
      means[b] = s / n;
    }
  }
  means.sort();
  return [quantile(means as unknown as number[], 0.025), quantile(means as unknown as number[], 0.975)];
}

/** A Binomial(m, q) draw by inversion of its cumulative table (cached per m and q). */
function drawBinomial(m: number, q: number, u: number, tables: Map<string, Float64Array>): number {
  if (m === 0 || q <= 0) return 0;
  if (q >= 1) return m;
  const key = `${m}:${q}`;
  let cdf = tables.get(key);
  if (!cdf) { cdf = binomialCdf(m, q); tables.set(key, cdf); }
  let lo = 0, hi = m;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (cdf[mid]! >= u) hi = mid; else lo = mid + 1; }
  return lo;
}

/** The cumulative distribution of Binomial(m, q), built outwards from the mode so no term underflows to a wrong total. */
export function binomialCdf(m: number, q: number): Float64Array {
  const pmf = new Float64Array(m + 1);
  const mode = Math.min(m, Math.floor((m + 1) * q));
  const odds = q / (1 - q);
  pmf[mode] = 1;
  for (let k = mode; k < m; k++) pmf[k + 1] = pmf[k]! * ((m - k) / (k + 1)) * odds;
  for (let k = mode; k > 0; k--) pmf[k - 1] = pmf[k]! * (k / (m - k + 1)) / odds;
  let total = 0;
  for (let k = 0; k <= m; k++) total += pmf[k]!;
  let acc = 0;
  for (let k = 0; k <= m; k++) { acc += pmf[k]! / total; pmf[k] = acc; }
  pmf[m] = 1;
  return pmf;
}

export function summarise(xs: readonly number[], seed: number): Summary {
  const binary = xs.every((x) => x === 0 || x === 1);
  if (binary && xs.length) {
    let k = 0;
    for (const x of xs) k += x;
    return { n: xs.length, mean: mean(xs), se: stderr(xs), ci: clopperPearson(k, xs.length), binary, ci_method: 'clopper-pearson' };
  }
  return { n: xs.length, mean: mean(xs), se: stderr(xs), ci: bootstrapCi(xs, seed), binary, ci_method: 'bootstrap' };
}

/**
 * The exact (Clopper-Pearson) two-sided interval for k successes in n trials at level 1 - alpha:
 * its coverage is at least the nominal level for every p, including at 0 of n and n of n, where a
 * percentile bootstrap has zero width. Bounds found by bisection on the binomial tail.
 */
export function clopperPearson(k: number, n: number, alpha = 0.05): [number, number] {
  if (n <= 0) return [NaN, NaN];
  const tail = alpha / 2;
  const cdf = (x: number, p: number) => binomialCdf(n, p)[x]!;
  // The p where an increasing function of p crosses the tail probability.
  const cross = (g: (p: number) => number): number => {
    let lo = 0, hi = 1;
    for (let i = 0; i < 60; i++) { const mid = (lo + hi) / 2; if (g(mid) < tail) lo = mid; else hi = mid; }
    return (lo + hi) / 2;
  };
  // Lower: P(X >= k | p) = tail (it rises with p). Upper: P(X <= k | p) = tail (it falls with p).
  const lower = k <= 0 ? 0 : cross((p) => 1 - cdf(k - 1, p));
  const upper = k >= n ? 1 : cross((p) => 2 * tail - cdf(k, p));
  return [lower, upper];
}

/** Paired comparison of a and b, item by item (same length, same item order). */
export function paired(a: readonly number[], b: readonly number[], seed: number): Paired {
  if (a.length !== b.length) throw new Error('paired: the conditions must score the same items');
  const d = a.map((x, i) => x - b[i]!);
  const binary = [...a, ...b].every((x) => x === 0 || x === 1);
  return {
    n: d.length, mean_diff: mean(d), se: stderr(d), ci: bootstrapCi(d, seed),
    ...(binary ? { mcnemar: mcnemar(a, b) } : {}),
  };
}

/** McNemar's test for paired binary outcomes: exact binomial below 25 discordant pairs, else chi-square (continuity-corrected). */
export function mcnemar(a: readonly number[], b: readonly number[]): McNemar {
  let nb = 0, nc = 0;
  for (let i = 0; i < a.length; i++) {
    if (a[i] === 1 && b[i] === 0) nb++;
    else if (a[i] === 0 && b[i] === 1) nc++;
  }
  const n = a.length, m = nb + nc;
  if (m < 25) return { b: nb, c: nc, n, method: 'exact', p: clampP(binomTwoSided(Math.min(nb, nc), m)) };
  const x = (Math.abs(nb - nc) - 1) ** 2 / m;
  return { b: nb, c: nc, n, method: 'chi2', statistic: x, p: clampP(chi2Df1Upper(x)) };
}

/** A p-value in [0, 1]: rounding in the tail sums and the erfc approximation can step just outside. */
export function clampP(p: number): number { return Number.isNaN(p) ? p : Math.min(1, Math.max(0, p)); }

/**
 * Holm's step-down adjustment of a family of p-values (controls the family-wise error rate with no
 * assumption on their dependence): the i-th smallest is multiplied by (m - i), made monotone, capped at 1.
 */
export function holm(ps: readonly number[]): number[] {
  const m = ps.length;
  const order = ps.map((p, i) => ({ p, i })).sort((a, b) => a.p - b.p);
  const out = new Array<number>(m);
  let run = 0;
  order.forEach(({ p, i }, j) => { run = Math.max(run, Math.min(1, (m - j) * p)); out[i] = clampP(run); });
  return out;
}

/** Two-sided exact binomial p for k successes or fewer out of m at 1/2 (doubled, capped at 1). */
export function binomTwoSided(k: number, m: number): number {
  if (m === 0) return 1;
  let tail = 0, c = 1;
  for (let i = 0; i <= k; i++) {
    tail += c * 0.5 ** m;
    c = (c * (m - i)) / (i + 1);
  }
  return Math.min(1, 2 * tail);
}

/** P(X > x) for chi-square with one degree of freedom: erfc(sqrt(x / 2)). */
export function chi2Df1Upper(x: number): number { return erfc(Math.sqrt(x / 2)); }

/** Complementary error function (W. J. Cody's rational approximations via Numerical Recipes' erfcc; |error| < 1.2e-7). */
export function erfc(x: number): number {
  const z = Math.abs(x), t = 1 / (1 + 0.5 * z);
  const r = t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
    + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? r : 2 - r;
}

/** A p-value with its n, as the reports print it: `p = 0.125 (exact McNemar, 7 discordant of n = 40)`. */
export function formatMcNemar(m: McNemar): string {
  const fp = (p: number) => (p < 0.001 ? p.toExponential(1) : p.toFixed(3));
  const adj = m.p_holm !== undefined && (m.family ?? 1) > 1 ? `, Holm-adjusted p = ${fp(m.p_holm)} over ${m.family} comparisons` : '';
  return `p = ${fp(m.p)}${adj} (${m.method === 'exact' ? 'exact binomial' : `chi-square ${m.statistic!.toFixed(2)}, continuity-corrected`} McNemar; ${m.b}+${m.c} discordant of n = ${m.n})`;
}
