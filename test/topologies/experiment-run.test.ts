import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Runner, parseExperiment, resolveInputs, type RunSpec, type TaskRequest } from '../../topologies/index.js';
import { makeArithmetic, parseDataset, type ExperimentResult } from '../../topologies/experiment/index.js';
import { SimulatedDriver } from '../../drivers/simulated/index.js';
import { FakeExecutor } from '../helpers/fake-executor.js';

function dataset(t: Test, lines: unknown[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ds-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'items.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return dir;
}

function spec(yaml: string, dir: string, set: string[] = []): RunSpec {
  const experiment = parseExperiment(yaml, { set });
  return { experiment, inputs: resolveInputs(experiment, dir) };
}

async function run(s: RunSpec, answer: (r: TaskRequest) => string) {
  const ex = new FakeExecutor(answer);
  const out = await new Runner({ runId: 'r1', spec: s, executor: ex }).run();
  return { out, ex, exp: out.details?.experiment as ExperimentResult };
}

const sim = (p: number, dependence = 0) => {
  const d = new SimulatedDriver({ name: 'simulated', options: { p: String(p), dependence: String(dependence) } });
  return (r: TaskRequest) => d.answer(r.prompt, r.seed ?? 0, r.json_schema);
};

t.test('a dataset file: ids, input fields, limit and a seeded shuffle; errors name the line', async (t) => {
  const items = parseDataset('{"id": "a", "question": "q1", "choices": ["x"], "expected": "x"}\n\n{"prompt": "q2"}\n', 'd.jsonl');
  t.same(items, [{ id: 'a', input: 'q1', fields: { question: 'q1', choices: ['x'] }, expected: 'x' }, { id: '3', input: 'q2', fields: { prompt: 'q2' } }]);
  t.throws(() => parseDataset('{"id": 1}\n{"id": 1}', 'd.jsonl'), /d\.jsonl:2: duplicate id "1"/);
  t.throws(() => parseDataset('{"id": 1}\nnope', 'd.jsonl'), /d\.jsonl:2: not JSON/);
  const dir = dataset(t, makeArithmetic(20, 1));
  const a = resolveInputs(parseExperiment('topology: star\ninputs: {dataset: items.jsonl, limit: 5, shuffle_seed: 3}'), dir).dataset!;
  const b = resolveInputs(parseExperiment('topology: star\ninputs: {dataset: items.jsonl, limit: 5, shuffle_seed: 3}'), dir).dataset!;
  const c = resolveInputs(parseExperiment('topology: star\ninputs: {dataset: items.jsonl, limit: 5}'), dir).dataset!;
  t.equal(a.length, 5);
  t.same(a, b, 'the same shuffle seed gives the same items');
  t.same(c.map((i) => i.id), ['arith-1-1', 'arith-1-2', 'arith-1-3', 'arith-1-4', 'arith-1-5'], 'no seed: the file order');
  t.notSame(a.map((i) => i.id), c.map((i) => i.id));
  t.throws(() => parseExperiment('topology: star\ninputs: {text: x}\nbaselines: [single]'), /baselines need inputs\.dataset/);
});

t.test('each item runs the topology and every baseline; votes match the topology\'s measured tokens', async (t) => {
  const dir = dataset(t, makeArithmetic(12, 2));
  const s = spec(`topology: diamond-debate
inputs: {dataset: items.jsonl, concurrency: 3}
debate: {stances: [a, b, c]}
limits: {rounds: 1}
baselines: [majority_vote, self_consistency]
baseline: {calibration_items: 4}
scorer: {type: numeric}
roles:
  baseline: {prompt: "Q: {{question}}", temperature: 0.7}
`, dir);
  const ex = new FakeExecutor(sim(1));
  const batches: string[][] = [];
  const submit = ex.submit.bind(ex);
  ex.submit = (tasks) => { batches.push(tasks.map((x) => x.meta.node)); return submit(tasks); };
  const out = await new Runner({ runId: 'r1', spec: s, executor: ex }).run();
  const exp = out.details!.experiment as ExperimentResult;
  t.equal(out.verdict, 'scored');
  t.same(exp.conditions.map((c) => c.name), ['diamond-debate', 'single', 'majority_vote', 'self_consistency'], 'single is added to match k against');
  for (const c of exp.conditions) t.equal(c.mean, 1, `${c.name}: p = 1 gets every item right`);
  const nodes = [...ex.requests.values()].map((r) => r.meta.node);
  t.ok(nodes.includes('diamond-debate/0/debate/merge') && nodes.includes('single/0/answer') && nodes.includes('majority_vote/11/a0'));
  const k = exp.budget!.k;
  t.equal(exp.budget!.method, 'tokens');
  t.equal(k, Math.round(exp.budget!.topology_per_item / exp.budget!.single_per_item), 'k = topology tokens / single tokens');
  t.ok(k > 1, `a 5-node debate costs more than one agent (k = ${k})`);
  t.match(exp.budget!.text, /measured on the first 4 item/);
  t.equal(nodes.filter((n) => n.startsWith('majority_vote/0/')).length, k);
  t.ok([...ex.requests.values()].filter((r) => r.meta.node.startsWith('self_consistency/')).every((r) => r.temperature === 0.7), 'self-consistency samples at baseline.temperature');
  t.equal([...ex.requests.values()].find((r) => r.meta.node === 'single/0/answer')!.prompt.slice(0, 23), 'Q: What is the result o', 'item fields render in prompts');
  t.notMatch([...ex.requests.values()].map((r) => r.prompt).join('\n'), /expected/, 'the reference never reaches a prompt');
  t.equal(exp.rows.length, 12);
  t.equal(exp.comparisons.length, 3);
  t.same(batches[0], ['diamond-debate/0/debate/propose', 'single/0/answer', 'diamond-debate/1/debate/propose'], 'the first step starts inputs.concurrency units, item by item; the votes wait for k');
});

t.test('simulated driver: majority-of-5 at p = 0.6 is the binomial 0.683; a dependent setting is not', async (t) => {
  const dir = dataset(t, makeArithmetic(1500, 11));
  const yaml = 'topology: star\ninputs: {dataset: items.jsonl, concurrency: 2000}\nbaselines: [majority_vote]\nbaseline: {k: 5}\nroles: {baseline: {temperature: 0.7}}\nscorer: {type: exact, extract: last_number}\n';
  // P(X >= 3), X ~ Binomial(5, 0.6) = 10*.6^3*.4^2 + 5*.6^4*.4 + .6^5
  const binom = 10 * 0.6 ** 3 * 0.4 ** 2 + 5 * 0.6 ** 4 * 0.4 + 0.6 ** 5;
  t.equal(binom.toFixed(3), '0.683');
  const ind = (await run(spec(yaml, dir), sim(0.6))).exp;
  const mv = ind.conditions.find((c) => c.name === 'majority_vote')!;
  const single = ind.conditions.find((c) => c.name === 'star')!;
  t.ok(mv.ci[0] <= binom && binom <= mv.ci[1], `independent: ${mv.mean.toFixed(3)} [${mv.ci.map((x) => x.toFixed(3))}] holds ${binom.toFixed(3)}`);
  t.ok(single.ci[0] <= 0.6 && 0.6 <= single.ci[1], `one agent: ${single.mean.toFixed(3)} [${single.ci.map((x) => x.toFixed(3))}] holds 0.6`);
  t.ok(ind.comparisons[0]!.mcnemar!.p < 0.001, `the vote beats one agent: ${ind.comparisons[0]!.mcnemar!.p}`);
  const dep = (await run(spec(yaml, dir), sim(0.6, 1))).exp;
  const dv = dep.conditions.find((c) => c.name === 'majority_vote')!;
  t.ok(binom > dv.ci[1], `fully dependent agents: ${dv.mean.toFixed(3)} [${dv.ci.map((x) => x.toFixed(3))}] does not reach ${binom.toFixed(3)}`);
});

t.test('the judge scorer grades each answer with the grader role; a resumed runner reruns nothing', async (t) => {
  const dir = dataset(t, [{ id: 'x', question: 'capital of France?', expected: 'Paris' }, { id: 'y', question: 'capital of Spain?', expected: 'Madrid' }]);
  const s = spec('topology: star\ninputs: {dataset: items.jsonl}\nbaselines: [single]\nscorer: {type: judge}\n', dir);
  const answer = (r: TaskRequest) => {
    if (r.meta.role === 'grader') return JSON.stringify({ verdict: r.prompt.includes('Candidate answer: Paris') ? 'correct' : 'incorrect' });
    return r.prompt.includes('France') ? 'Paris' : 'Barcelona';
  };
  const ex = new FakeExecutor(answer);
  const out = await new Runner({ runId: 'r1', spec: s, executor: ex }).run();
  const exp = out.details!.experiment as ExperimentResult;
  t.same(exp.conditions.map((c) => c.mean), [0.5, 0.5]);
  t.ok([...ex.requests.values()].some((r) => r.meta.node === 'star/0/grade' && r.json_schema), 'the grader answers in a schema');
  const before = ex.requests.size;
  const again = await new Runner({ runId: 'r1', spec: s, executor: ex }).run();
  t.equal(ex.requests.size, before, 'resubmission is idempotent: no new task');
  t.same((again.details!.experiment as ExperimentResult).conditions.map((c) => c.mean), [0.5, 0.5]);
});

t.test('an exec scorer runs only where the hub allows it (SWARM_EXEC_SCORERS=1)', async (t) => {
  const dir = dataset(t, [{ id: 'a', question: 'q', expected: 'x' }, { id: 'b', question: 'q2', expected: 'y' }]);
  fs.writeFileSync(path.join(dir, 'score.mjs'), "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const o=JSON.parse(s);console.log(o.answer===o.item.expected?1:0)})");
  const s = spec(`topology: star\ninputs: {dataset: items.jsonl}\nscorer: {type: exec, command: [${JSON.stringify(process.execPath)}, score.mjs]}\n`, dir);
  const before = process.env.SWARM_EXEC_SCORERS;
  t.teardown(() => { if (before === undefined) delete process.env.SWARM_EXEC_SCORERS; else process.env.SWARM_EXEC_SCORERS = before; });
  delete process.env.SWARM_EXEC_SCORERS;
  const refused = await run(s, () => 'x');
  t.equal(refused.out.verdict, 'failed');
  t.match(refused.out.reason, /SWARM_EXEC_SCORERS=1/);
  t.equal(refused.ex.requests.size, 0, 'no task ran');
  process.env.SWARM_EXEC_SCORERS = '1';
  const ok = await run(s, () => 'x');
  t.equal(ok.out.verdict, 'scored');
  t.same(ok.exp.rows.map((r) => r.cells.star!.score), [1, 0], 'the command scored each answer against its item');
});
