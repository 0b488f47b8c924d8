import t, { type Test } from 'tap';
import { binomTwoSided, bootstrapCi, chi2Df1Upper, formatMcNemar, mcnemar, mean, paired, quantile, stderr, summarise } from '../../topologies/experiment/stats.js';

const close = (t: Test, a: number, b: number, tol: number, msg: string) => t.ok(Math.abs(a - b) <= tol, `${msg}: ${a} vs ${b} (±${tol})`);

t.test('mean and standard error against hand-computed values', async (t) => {
  t.equal(mean([1, 0, 1, 1]), 0.75);
  // sd = sqrt(((0.25^2)*3 + 0.75^2) / 3) = 0.5; se = 0.5 / 2
  t.equal(stderr([1, 0, 1, 1]), 0.25);
  t.equal(stderr([1]), 0);
  t.equal(quantile([1, 2, 3, 4], 0.5), 2.5);
});

t.test('McNemar: exact binomial for few discordant pairs, chi-square otherwise', async (t) => {
  // 1 vs 6 discordant: p = 2 * (C(7,0) + C(7,1)) / 2^7 = 16/128
  const a = [1, 0, 0, 0, 0, 0, 0, 1, 1, 0];
  const b = [0, 1, 1, 1, 1, 1, 1, 1, 1, 0];
  const m = mcnemar(a, b);
  t.match(m, { b: 1, c: 6, n: 10, method: 'exact' });
  t.equal(m.p, 0.125);
  t.equal(binomTwoSided(2, 10), 0.109375, '2 * (1 + 10 + 45) / 1024');
  t.equal(binomTwoSided(5, 10), 1, 'capped at 1');
  t.equal(mcnemar([1, 0], [1, 0]).p, 1, 'no discordant pairs: p = 1');
  // 10 vs 25: chi2 = (|10-25| - 1)^2 / 35 = 5.6; P(chi2_1 > 5.6) = 0.017961
  const x = [...Array(10).fill(1), ...Array(25).fill(0), ...Array(5).fill(1)];
  const y = [...Array(10).fill(0), ...Array(25).fill(1), ...Array(5).fill(1)];
  const c = mcnemar(x, y);
  t.match(c, { b: 10, c: 25, n: 40, method: 'chi2' });
  close(t, c.statistic!, 5.6, 1e-12, 'statistic');
  close(t, c.p, 0.017961, 2e-6, 'p');
  close(t, chi2Df1Upper(3.841459), 0.05, 1e-6, 'the 5% point of chi-square(1)');
  t.equal(formatMcNemar(m), 'p = 0.125 (exact binomial McNemar; 1+6 discordant of n = 10)', 'no p-value without its n');
});

t.test('bootstrap: seeded, degenerate cases, and the normal approximation on a large sample', async (t) => {
  const xs = [...Array(240).fill(1), ...Array(160).fill(0)];
  t.same(bootstrapCi(xs, 7), bootstrapCi(xs, 7), 'the same seed gives the same interval');
  t.same(bootstrapCi([1, 1, 1], 1), [1, 1], 'no spread, no interval');
  const [lo, hi] = bootstrapCi(xs, 7);
  const se = stderr(xs);
  close(t, lo, 0.6 - 1.96 * se, 0.01, 'lower bound near mean - 1.96 se');
  close(t, hi, 0.6 + 1.96 * se, 0.01, 'upper bound near mean + 1.96 se');
  const s = summarise(xs, 7);
  t.match(s, { n: 400, mean: 0.6, binary: true });
});

t.test('paired bootstrap against an exact enumeration', async (t) => {
  // Differences [1, 0, 0]: the 27 equally likely resamples give mean k/3 with k ~ Binomial(3, 1/3):
  // P(0) = 8/27, P(1) = 12/27, P(2) = 6/27, P(3) = 1/27; the 2.5% point is 0, the 97.5% point is 1 (26/27 < 0.975).
  const p = paired([1, 1, 0], [0, 1, 0], 3);
  t.equal(p.mean_diff, 1 / 3);
  t.same(p.ci, [0, 1]);
  t.match(p.mcnemar, { b: 1, c: 0, n: 3, method: 'exact', p: 1 });
  // The paired interval is narrower than the unpaired one when the conditions move together.
  const a = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? 0 : 1));
  const b = a.map((x, i) => (i % 10 === 0 ? 0 : x));
  const pd = paired(a, b, 5);
  t.ok(pd.ci[0] >= 0 && pd.ci[1] > 0, `paired interval ${pd.ci} is at or above 0: b never beats a`);
  t.notOk(paired([0.5, 1], [0, 1], 1).mcnemar, 'no McNemar for non-binary scores');
  t.throws(() => paired([1], [1, 0], 1));
});

t.test('the counts shortcut draws the same bootstrap distribution as resampling items', async (t) => {
  const { binomialCdf } = await import('../../topologies/experiment/stats.js');
  const cdf = binomialCdf(10, 0.3);
  close(t, cdf[3]!, 0.6496107184, 1e-9, 'P(Binomial(10, .3) <= 3)');
  t.equal(binomialCdf(1000, 0.999)[1000], 1, 'no underflow far from the mode');
  // Nine distinct values take the plain path; the same data with a tenth value added barely moves the interval.
  const few = Array.from({ length: 300 }, (_, i) => (i % 10 < 6 ? 1 : 0));
  const many = few.map((x, i) => (i === 0 ? 0.999999 : x)).map((x, i) => (i < 9 ? x + i * 1e-9 : x));
  const a = bootstrapCi(few, 9, 4000), b = bootstrapCi(many, 9, 4000);
  close(t, a[0], b[0], 0.012, 'lower bounds agree');
  close(t, a[1], b[1], 0.012, 'upper bounds agree');
});
