import t from 'tap';
import { kappaText } from '../../cli/commands/run.js';
import { fleissKappa } from '../../topologies/index.js';

t.test('an undefined kappa says why', async (t) => {
  const all = [['7', '7'], ['7', '7'], ['7', '7']];
  t.equal(fleissKappa(all), null, 'every rating in one category: chance agreement is 1');
  t.match(kappaText({ kappa: null, kappa_method: 'fleiss' }), /kappa undefined \(fleiss\): every rating fell in one category, so agreement expected by chance is 1/);
  t.match(kappaText({ kappa: null, kappa_method: 'none' }), /fewer than two judges/);
  t.equal(kappaText({ kappa: 0.41234, kappa_method: 'cohen' }), 'kappa 0.412 (cohen)');
});
