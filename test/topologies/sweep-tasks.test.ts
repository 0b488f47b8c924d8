import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { swarm, tempDir } from '../helpers/cli.js';
import { chart } from '../../topologies/experiment/charts.js';
import { makeMultipleChoice, makeWordProblems } from '../../topologies/experiment/index.js';
import { findExpression } from '../../drivers/simulated/index.js';

t.test('charts: a cost axis starts at 0; series differ by marker, each in the legend', async (t) => {
  const svg = chart({ title: 'c', xLabel: 'tokens', series: [{ name: 'a', points: [{ x: 40, y: 0.5 }] }, { name: 'b', points: [{ x: 60, y: 0.7 }] }, { name: 'c', points: [{ x: 50, y: 0.6 }] }] });
  const ticks = [...svg.matchAll(/<text x="[\d.]+" y="[\d.]+" font-size="10" text-anchor="middle">([^<]+)<\/text>/g)].map((m) => m[1]);
  t.equal(ticks[0], '0', `the x axis starts at 0 (ticks ${ticks.join(', ')}), not below`);
  t.match(svg, /<circle/);
  t.match(svg, /<rect x/, 'a square marker');
  t.match(svg, /<polygon/, 'a triangle marker');
  t.equal((svg.match(/<rect x/g) ?? []).length, 2, 'square: the point and its legend entry');
});

t.test('two more offline generators: seeded, one integer answer each, the answer in the options', async (t) => {
  t.same(makeWordProblems(20, 4), makeWordProblems(20, 4));
  t.notSame(makeWordProblems(5, 4), makeWordProblems(5, 5));
  for (const w of makeWordProblems(200, 1)) {
    t.ok(/^\d+$/.test(w.expected), `${w.id}: a non-negative integer answer (${w.expected})`);
    t.notOk(findExpression(w.question), 'no arithmetic expression to copy: the steps are in words');
  }
  for (const m of makeMultipleChoice(200, 1)) {
    t.equal(m.choices!.length, 4);
    t.equal(new Set(m.choices).size, 4, `${m.id}: four distinct options`);
    t.ok(['1', '2', '3', '4'].includes(m.expected));
    t.match(m.question, `(${m.expected}) ${m.choices![Number(m.expected) - 1]}`);
  }
});

t.test('a sweep across three tasks: task rows x method columns in sweep.html and tasks.csv; k, failed and paired tests; a dataset run drawn per item', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  for (const task of ['arithmetic', 'word-problems', 'multiple-choice']) {
    t.equal(swarm(['dataset', 'make', task, '--n', '6', '--seed', '1', '--out', path.join(dir, `${task}.jsonl`)]).code, 0);
  }
  fs.writeFileSync(path.join(dir, 'exp.yaml'), ['name: tasks', 'topology: star', 'seed: 1', 'inputs: {dataset: arithmetic.jsonl, concurrency: 8}',
    'baselines: [single, majority_vote]', 'baseline: {k: 3}', 'roles: {baseline: {temperature: 0.7}}', 'scorer: {type: exact, extract: last_number}', ''].join('\n'));
  const r = swarm(['sweep', path.join(dir, 'exp.yaml'), '--grid', 'inputs.dataset=arithmetic.jsonl,word-problems.jsonl,multiple-choice.jsonl',
    '--driver', 'simulated', '--driver-opt', 'p=0.7', '--agents', '2', '--state-dir', state, '--json'], { timeoutMs: 240_000 });
  t.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { html: string; csv: string };
  const csv = fs.readFileSync(out.csv, 'utf8').trim().split('\n');
  t.equal(csv.length, 4, 'a header and a row per task');
  t.match(csv[0], /^task,star mean,star se,star ci_lo,star ci_hi,star n,single mean,.*majority_vote n$/);
  t.same(csv.slice(1).map((l) => l.split(',')[0]), ['arithmetic', 'word-problems', 'multiple-choice']);
  t.ok(csv.slice(1).every((l) => l.split(',')[5] === '6'), 'n = 6 items per task');
  const html = fs.readFileSync(out.html, 'utf8');
  t.match(html, /<h2>Across tasks<\/h2>.*<th>task<\/th><th>star<\/th><th>single<\/th><th>majority_vote<\/th>/s);
  t.match(html, /<h2>Paired tests<\/h2>.*star − majority_vote/s);
  t.match(html, /<th>failed<\/th><th>k<\/th>/);
  t.match(html, /<td>majority_vote<\/td>(<td>[^<]*<\/td>){2}<td><b>[\d.]+<\/b>[^<]*<\/td><td>[^<]*<\/td><td>0<\/td><td>3<\/td>/, 'k = 3 and failed = 0 per cell');
  const sweep = JSON.parse(fs.readFileSync(path.join(path.dirname(out.html), 'sweep.json'), 'utf8')) as { cells: { run: string }[] };
  const report = fs.readFileSync(path.join(state, 'runs', sweep.cells[0]!.run, 'report.html'), 'utf8');
  t.match(report, /Graph of item 0 \(star\)/, 'one small graph');
  t.match(report, /<h2>Items<\/h2><table><tr><th>item<\/th><th>star<\/th><th>single<\/th><th>majority_vote<\/th>/, 'and a table of every item');
  t.ok(report.length < 400_000, `the page stays small: ${report.length} bytes`);
});
