import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { swarm, tempDir } from '../helpers/cli.js';

// The simulated driver answers arithmetic rightly with a set probability: a whole sweep runs in seconds.
t.test('swarm sweep: cartesian cells, resumed without rerunning finished cells; sweep.json and sweep.html', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const made = swarm(['dataset', 'make', 'arithmetic', '--n', '16', '--seed', '3', '--out', path.join(dir, 'items.jsonl')]);
  t.equal(made.code, 0, made.stderr);
  fs.writeFileSync(path.join(dir, 'exp.yaml'), [
    'name: sweep-test', 'topology: diamond-debate', 'seed: 1',
    'inputs: {dataset: items.jsonl, concurrency: 8}', 'debate: {stances: [a]}', 'limits: {rounds: 1}',
    'baselines: [single, majority_vote]', 'baseline: {calibration_items: 3}', 'roles: {baseline: {temperature: 0.7}}', 'scorer: {type: exact, extract: last_number}', '',
  ].join('\n'));
  const runs = () => fs.readdirSync(path.join(state, 'runs')).length;
  const sweep = (grid: string[]) => swarm(['sweep', path.join(dir, 'exp.yaml'), ...grid.flatMap((g) => ['--grid', g]), '--seeds', '2',
    '--driver', 'simulated', '--driver-opt', 'p=0.7', '--agents', '3', '--state-dir', state, '--json'], { timeoutMs: 240_000 });

  const a = sweep(['agents=1,2']);
  t.equal(a.code, 0, a.stderr);
  t.match(JSON.parse(a.stdout), { cells: 4, ran: 4, reused: 0 });
  t.equal(runs(), 4);
  const out = path.join(state, 'sweeps', 'sweep-test');
  const first = JSON.parse(fs.readFileSync(path.join(out, 'sweep.json'), 'utf8')) as { cells: { key: string; run: string; state: string }[]; simulated: boolean };
  t.same(first.cells.map((c) => c.key), ['agents=1 seed=1', 'agents=1 seed=2', 'agents=2 seed=1', 'agents=2 seed=2']);
  t.ok(first.cells.every((c) => c.state === 'done'));
  t.equal(first.simulated, true, 'a simulated sweep says so');

  const again = sweep(['agents=1,2']);
  t.match(JSON.parse(again.stdout), { cells: 4, ran: 0, reused: 4 }, 'a finished sweep runs nothing again');
  const more = sweep(['agents=1,2,3']);
  t.equal(more.code, 0, more.stderr);
  t.match(JSON.parse(more.stdout), { cells: 6, ran: 2, reused: 4 }, 'a wider grid runs only its new cells');
  t.equal(runs(), 6);
  const after = JSON.parse(fs.readFileSync(path.join(out, 'sweep.json'), 'utf8')) as { cells: { key: string; run: string }[] };
  for (const c of first.cells) t.equal(after.cells.find((x) => x.key === c.key)?.run, c.run, `${c.key} kept its run`);

  const html = fs.readFileSync(path.join(out, 'sweep.html'), 'utf8');
  t.match(html, /SIMULATED DRIVER/);
  t.match(html, /Accuracy against agents/);
  t.match(html, /Accuracy against cost/);
  t.match(html, /experiment\.html#io-0-diamond-debate/, 'each item links to its prompt and output');
  const run = after.cells[0]!.run;
  const exp = fs.readFileSync(path.join(state, 'runs', run, 'experiment.html'), 'utf8');
  t.match(exp, /id="io-0-diamond-debate"/);
  t.match(exp, /SIMULATED DRIVER/);
  t.match(fs.readFileSync(path.join(state, 'runs', run, 'report.md'), 'utf8'), /## Experiment[\s\S]*SIMULATED DRIVER[\s\S]*\| majority_vote \|/);

  const show = swarm(['runs', 'show', run.slice(0, -2), '--state-dir', state, '--json']);
  t.equal(show.code, 0, show.stderr);
  t.equal((JSON.parse(show.stdout) as { run: string }).run, run, 'runs show takes a unique prefix');
  t.equal(swarm(['runs', 'show', run.slice(-4), '--state-dir', state, '--json']).code, 0, 'or the 4 letters after the time');
  const amb = swarm(['runs', 'show', run.slice(0, 4), '--state-dir', state]);
  t.equal(amb.code, 2);
  t.match(amb.stderr, /ambiguous/);
  const ls = swarm(['runs', 'ls', '--state-dir', state]);
  t.match(ls.stdout.split('\n')[0], /^RUN\s+TOPOLOGY\s+VERDICT\s+NODES\s+WALL\s+EXPERIMENT$/, 'runs ls has a header row');
});
