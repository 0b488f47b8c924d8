import t from 'tap';
import { Histogram } from '../../hub/histogram.js';

t.test('quantiles come from the reservoir sorted by value, and follow every new observation', async (t) => {
  const h = new Histogram([1, 10, 100], 1000);
  t.equal(h.quantile(0.5), 0, 'empty: 0');
  // Values whose string order differs from their numeric order (a default sort would put 10 before 9).
  for (const v of [100, 9, 10, 2, 1000, 0.5]) h.observe(v);
  t.equal(h.quantile(0), 0.5);
  t.equal(h.quantile(0.5), 10);
  t.equal(h.quantile(0.99), 1000);
  h.observe(5000);
  t.equal(h.quantile(0.99), 5000, 'an observation after a quantile is counted in the next one');
  t.equal(h.quantile(0.5), 10);
  t.equal(h.count, 7);
  t.match(h.render('x', 'y'), /x_bucket\{le="10"\} 4/);
});

t.test('past the reservoir\'s size the quantiles stay within what was observed', async (t) => {
  const h = new Histogram([1], 100);
  for (let i = 0; i < 10_000; i++) h.observe(i % 2 ? 1 : 3);
  t.ok([1, 3].includes(h.quantile(0.5)));
  t.equal(h.quantile(0), 1);
  t.equal(h.quantile(1), 3);
});
