import { rng } from './dataset.js';

/** Mean, standard error and a seeded 95% percentile-bootstrap interval of per-item scores. */
export interface Summary { n: number; mean: number; se: number; ci: [number, number]; binary: boolean }

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

/** 95% percentile bootstrap interval of the mean, resampling with a seeded generator. */
export function bootstrapCi(xs: readonly number[], seed: number, resamples = BOOTSTRAP_RESAMPLES): [number, number] {
  const n = xs.length;
  if (n === 0) return [NaN, NaN];
  const r = rng(seed);
  const means = new Float64Array(resamples);
  for (let b = 0; b < resamples; b++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += xs[(r() * n) | 0]!;
    means[b] = s / n;
  }
  means.sort();
  return [quantile(means as unknown as number[], 0.025), quantile(means as unknown as number[], 0.975)];
}

export function summarise(xs: readonly number[], seed: number): Summary {
  return { n: xs.length, mean: mean(xs), se: stderr(xs), ci: bootstrapCi(xs, seed), binary: xs.every((x) => x === 0 || x === 1) };
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
  if (m < 25) return { b: nb, c: nc, n, method: 'exact', p: binomTwoSided(Math.min(nb, nc), m) };
  const x = (Math.abs(nb - nc) - 1) ** 2 / m;
  return { b: nb, c: nc, n, method: 'chi2', statistic: x, p: chi2Df1Upper(x) };
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
  const p = m.p < 0.001 ? m.p.toExponential(1) : m.p.toFixed(3);
  return `p = ${p} (${m.method === 'exact' ? 'exact binomial' : `chi-square ${m.statistic!.toFixed(2)}, continuity-corrected`} McNemar; ${m.b}+${m.c} discordant of n = ${m.n})`;
}
