import fs from 'node:fs';
import t from 'tap';
import { pidsMentioning, swarm, tempDir } from '../helpers/cli.js';

/**
 * State files damaged while no swarm runs, as a disk error, a careless edit or another tool leaves
 * them: `swarm up` either starts with nothing acknowledged lost or refuses with a code that says
 * which file and what to do, never SWARM_ERR_INTERNAL ("a bug").
 */
t.test('a damaged lock-id: up refuses naming the file and the remedy; once removed, up starts', async (t) => {
  const dir = tempDir(t);
  const up = () => swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(up().code, 0, 'a first swarm');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  const file = `${dir}/lock-id`;
  for (const damage of [() => fs.writeFileSync(file, 'garbage\u0000\n'), () => fs.writeFileSync(file, ''), () => fs.mkdirSync(file)]) {
    fs.rmSync(file, { recursive: true, force: true });
    damage();
    const r = up();
    t.equal(r.code, 2, 'refused as a configuration error, not a bug');
    t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: .*${file} is damaged.*rm -r ${file}`), 'names the file and the remedy');
    t.same(pidsMentioning(dir), [], 'no process left');
  }
  fs.rmSync(file, { recursive: true });
  t.equal(up().code, 0, 'with it removed, up starts');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});
