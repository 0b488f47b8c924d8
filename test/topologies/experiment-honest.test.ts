import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Runner, parseExperiment, resolveInputs, type NodeResult, type RunSpec, type TaskRequest } from '../../topologies/index.js';
import { binomialCdf, clampP, clopperPearson, holm, summarise, formatMcNemar, mcnemar } from '../../topologies/experiment/stats.js';
import { makeArithmetic, type ExperimentResult } from '../../topologies/experiment/index.js';
import { voteKey } from '../../topologies/scorers/index.js';
import { ScorerSchema } from '../../topologies/schema.js';
import { SimulatedDriver } from '../../drivers/simulated/index.js';
import { uniform } from '../../drivers/simulated/driver.js';
import { FakeExecutor } from '../helpers/fake-executor.js';

const close = (t: Test, a: number, b: number, tol: number, msg: string) => t.ok(Math.abs(a - b) <= tol, `${msg}: ${a} vs ${b} (±${tol})`);

function dataset(t: Test, lines: unknown[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ds-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'items.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return dir;
}

async function run(yaml: string, dir: string, answer: (r: TaskRequest) => string | NodeResult) {
  const experiment = parseExperiment(yaml);
  const spec: RunSpec = { experiment, inputs: resolveInputs(experiment, dir) };
  const ex = new FakeExecutor(answer);
  const out = await new Runner({ runId: 'r1', spec, executor: ex }).run();
  return { out, ex, exp: out.details?.experiment as ExperimentResult };
}

t.test('Clopper-Pearson matches the beta quantiles and holds 95% coverage at n = 20, p = 0.95', async (t) => {
  // scipy.stats.beta.ppf(0.025, k, n-k+1) and beta.ppf(0.975, k+1, n-k).
  const want: [number, number, number, number][] = [[7, 20, 0.15390920478454118, 0.5921885345328282], [0, 20, 0, 0.1684334709830853],
    [20, 20, 0.8315665290169146, 1], [19, 20, 0.7512672372279722, 0.9987349105020502], [3, 50, 0.01254858783533406, 0.16548194660377288]];
  for (const [k, n, lo, hi] of want) {
    const ci = clopperPearson(k, n);
    close(t, ci[0], lo, 1e-9, `${k}/${n} lower`);
    close(t, ci[1], hi, 1e-9, `${k}/${n} upper`);
  }
  // Exact coverage: the probability over X ~ Binomial(n, p) that the interval of X holds p.
  const coverage = (n: number, p: number, ci: (k: number) => [number, number]) => {
    const cdf = binomialCdf(n, p);
    let c = 0;
    for (let k = 0; k <= n; k++) { const [lo, hi] = ci(k); if (lo <= p && p <= hi) c += cdf[k]! - (k ? cdf[k - 1]! : 0); }
    return c;
  };
  for (const p of [0.05, 0.3, 0.5, 0.8, 0.9, 0.95, 0.99]) {
    const cov = coverage(20, p, (k) => summarise([...Array(k).fill(1), ...Array(20 - k).fill(0)], 1).ci);
    t.ok(cov >= 0.95, `coverage at n = 20, p = ${p}: ${cov.toFixed(4)} >= 0.95`);
  }
  const all = summarise(Array(14).fill(1), 1);
  t.equal(all.ci_method, 'clopper-pearson');
  t.ok(all.ci[0] < 0.8 && all.ci[1] === 1, `all 14 right: [${all.ci}] has width, not [1, 1]`);
  const none = summarise(Array(14).fill(0), 1);
  t.ok(none.ci[0] === 0 && none.ci[1] > 0.2, `all 14 wrong: [${none.ci}] has width, not [0, 0]`);
  t.equal(summarise([0, 0.5, 1, 1], 1).ci_method, 'bootstrap', 'scores other than 0/1 keep the bootstrap');
});

t.test('Holm adjustment beside the raw p; p-values stay in [0, 1]', async (t) => {
  t.same(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06]);
  t.same(holm([0.5, 0.9]), [1, 1], 'capped at 1');
  t.same(holm([]), []);
  t.equal(clampP(1.00000003), 1);
  t.equal(clampP(-1e-17), 0);
  // b = c on the chi-square path: the statistic is near 0, where erfc's approximation passes 1.
  for (const d of [13, 20, 40]) {
    const m = mcnemar([...Array(d).fill(1), ...Array(d).fill(0)], [...Array(d).fill(0), ...Array(d).fill(1)]);
    t.ok(m.p >= 0 && m.p <= 1, `${d}+${d} discordant: p = ${m.p} in [0, 1]`);
  }
  const m = { ...mcnemar([1, 0, 0, 0, 0, 0, 0, 1, 1, 0], [0, 1, 1, 1, 1, 1, 1, 1, 1, 0]), p_holm: 0.25, family: 2 };
  t.match(formatMcNemar(m), /^p = 0\.125, Holm-adjusted p = 0\.250 over 2 comparisons/);
});

t.test('every scorer votes on what it extracts, never on the whole text', async (t) => {
  const sc = (o: unknown) => ScorerSchema.parse(o);
  const regex = sc({ type: 'regex', pattern: '\\b{{expected}}\\b', flags: '' });
  t.equal(voteKey(regex, 'The answer is (B).'), 'b');
  t.equal(voteKey(regex, 'After some thought, my answer: B'), 'b', 'two wordings, one key');
  t.equal(voteKey(sc({ type: 'regex', pattern: 'x', answer: 'Answer: *\\(?([A-D])' }), 'Answer: (C) since…'), 'c', 'an explicit answer pattern');
  t.equal(voteKey(sc({ type: 'judge' }), 'Let me think.\nParis'), 'paris', 'judge: the last line');
  t.equal(voteKey(sc({ type: 'exec', command: ['x'] }), 'so\n 42 '), '42', 'exec: the last line');
  t.equal(voteKey(sc({ type: 'judge', extract: 'last_number' }), 'about 3 or 4'), '4');
  t.equal(voteKey(sc({ type: 'exact', extract: 'last_number' }), 'it is 1,000.'), '1000');
  t.equal(voteKey(sc({ type: 'json_field', path: 'a' }), 'x {"a": 2} y'), '2');
  t.equal(voteKey(sc({ type: 'regex', pattern: '(?<{{expected}}>a)' }), 'a'), '', 'a pattern that cannot read any answer extracts nothing, and throws nothing');
});

t.test('a vote on the extracted letter: varied wording no longer makes every vote a tie', async (t) => {
  const n = 200, letters = ['A', 'B', 'C', 'D'];
  const items = Array.from({ length: n }, (_, i) => ({ id: `q${i}`, question: `Question ${i}?`, expected: letters[i % 4] }));
  const dir = dataset(t, items);
  const WORDING = ['The answer is ({L}).', 'Answer: {L}', 'I would go with {L}', 'After some thought: {L}.'];
  const answer = (r: TaskRequest) => {
    const i = Number(/Question (\d+)/.exec(r.prompt)![1]);
    const right = uniform(r.meta.node, 17) < 0.6;
    const L = right ? letters[i % 4]! : letters[(i + 1) % 4]!;
    return WORDING[Math.floor(uniform(`w:${r.meta.node}`, 17) * WORDING.length)]!.replace('{L}', L);
  };
  const { exp } = await run('topology: star\ninputs: {dataset: items.jsonl, concurrency: 400}\nbaselines: [majority_vote]\nbaseline: {k: 5}\n'
    + 'roles: {baseline: {temperature: 0.7}}\nscorer: {type: regex, pattern: "\\\\b{{expected}}\\\\b", flags: ""}\n', dir, answer);
  const mv = exp.conditions.find((c) => c.name === 'majority_vote')!;
  const sameAsFirst = exp.rows.filter((r) => r.cells.majority_vote!.node?.endsWith('/a0')).length;
  t.ok(sameAsFirst < n * 0.8, `the vote took agent a0's answer on ${sameAsFirst} of ${n} items, not on every one`);
  // Majority-of-5 at 0.6 with one distractor: 0.683.
  t.ok(mv.ci[0] <= 0.683 && 0.683 <= mv.ci[1], `majority of 5: ${mv.mean.toFixed(3)} [${mv.ci.map((x) => x.toFixed(3))}] holds 0.683`);
  t.equal(exp.rows[0]!.cells.majority_vote!.extracted?.length, 1, 'the report shows the extracted letter');
});

t.test('a failed node is failed and never scored: its error text is no answer', async (t) => {
  const dir = dataset(t, [{ id: 'a', question: 'q1', expected: 1 }, { id: 'b', question: 'q2', expected: 2 }]);
  const fails = (r: TaskRequest): string | NodeResult => (r.prompt.includes('q1')
    ? { ok: false, text: '', error: { code: 'SWARM_ERR_ENGINE', msg: 'engine exited [exit code 1]' } } : 'it is 2');
  const { exp } = await run('topology: star\ninputs: {dataset: items.jsonl}\nbaselines: [single]\nscorer: {type: exact, extract: last_number}\n', dir, fails);
  for (const c of exp.conditions) {
    t.equal(c.failed, 1, `${c.name}: one failed item`);
    t.equal(c.mean, 0.5, `${c.name}: the failed item scores 0, the other 1`);
  }
  const cell = exp.rows[0]!.cells.star!;
  t.equal(cell.score, 0);
  t.match(cell.error, /no answer/);
  t.notOk(cell.extracted, 'nothing was extracted from the error text');
  // The judge never grades a failed unit.
  const judged = await run('topology: star\ninputs: {dataset: items.jsonl}\nscorer: {type: judge}\n', dir, (r) => (r.meta.role === 'grader' ? '{"verdict": "correct"}' : fails(r)));
  t.notOk([...judged.ex.requests.values()].some((r) => r.meta.node === 'star/0/grade'), 'no grader task for the failed item');
  t.same(judged.exp.rows.map((r) => r.cells.star!.score), [0, 1]);
});

t.test('votes sample: refused at temperature 0, else every vote gets its own seed at the temperature asked', async (t) => {
  const base = 'topology: star\ninputs: {dataset: items.jsonl}\nbaselines: [majority_vote]\nbaseline: {k: 3}\nscorer: {type: exact, extract: last_number}\n';
  t.throws(() => parseExperiment(base), /majority_vote at temperature 0 votes k identical answers/);
  t.throws(() => parseExperiment(base.replace('majority_vote', 'self_consistency') + 'baseline: {k: 3, temperature: 0}'), /unique|self_consistency at temperature 0/);
  t.doesNotThrow(() => parseExperiment(base.replace('{k: 3}', '{k: 1}')), 'one voter is a single agent: nothing to refuse');
  const dir = dataset(t, makeArithmetic(4, 1));
  const { ex } = await run(`${base}roles: {baseline: {temperature: 0.7}}\n`, dir, () => '1');
  const votes = [...ex.requests.values()].filter((r) => r.meta.node.startsWith('majority_vote/'));
  t.equal(votes.length, 12);
  t.ok(votes.every((r) => r.temperature === 0.7), 'at the baseline role\'s temperature');
  t.equal(new Set(votes.map((r) => r.seed)).size, 12, 'a distinct seed per vote');
});

t.test('the simulated driver honours temperature: greedy at 0, seeded draws above', async (t) => {
  const d = new SimulatedDriver({ name: 'simulated', options: { p: '0.5' } });
  const prompt = 'What is 3+4*5?';
  const answers = async (temperature: number) => {
    const out = new Set<string>();
    for (let seed = 0; seed < 40; seed++) for await (const c of d.chat(prompt, { temperature, seed })) out.add(c);
    return out;
  };
  t.equal((await answers(0)).size, 1, 'temperature 0: one answer whatever the seed');
  t.equal((await answers(0.7)).size, 2, 'temperature 0.7: right and wrong across seeds');
});

t.test('compute counts evaluated prompt tokens and output; cache hits apart; a capped k says the budgets differ', async (t) => {
  const dir = dataset(t, makeArithmetic(6, 2));
  const receipt = (r: TaskRequest): NodeResult => {
    const topo = r.meta.node.startsWith('pipeline/');
    // The topology's nodes are expensive; a vote's prompt is mostly a prefix-cache hit.
    return { ok: true, text: 'it is 1', receipt: topo ? { tokens_in: 400, tokens_out: 100, duration_ms: 1 } : { tokens_in: 100, tokens_cached: 80, tokens_out: 5, duration_ms: 1 } };
  };
  const yaml = 'topology: pipeline\npipeline: {stages: [a], gates: {}}\nroles: {a: {prompt: "{{input}}"}, baseline: {temperature: 0.7}}\ninputs: {dataset: items.jsonl}\nbaselines: [majority_vote]\n'
    + 'baseline: {calibration_items: 2, k_max: 4}\nscorer: {type: exact, extract: last_number}\n';
  const { exp } = await run(yaml, dir, (r) => receipt(r));
  const single = exp.conditions.find((c) => c.name === 'single')!;
  t.equal(single.prompt_tokens_per_item, 20, 'evaluated prompt tokens: 100 in, 80 of them cached');
  t.equal(single.cached_tokens_per_item, 80);
  t.equal(single.tokens_per_item, 25, 'compute: 20 evaluated + 5 output');
  const b = exp.budget!;
  t.equal(b.wanted, 20, 'matching on computed tokens: 500 / 25');
  t.equal(b.k, 4);
  t.equal(b.capped, true);
  t.match(b.text, /caps it, so the votes' budget is about 80% below the topology's: not equal compute/);
  const v = b.spent!.votes[0]!;
  t.equal(v.condition, 'majority_vote');
  close(t, v.vs_topology, 100 / 500 - 1, 1e-9, 'the votes spent 80% less over the run');
});
