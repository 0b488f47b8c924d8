import t from 'tap';
import { Runner, cohenKappa, fleissKappa, parseExperiment, parseJsonObject, type RunSpec, type TaskRequest } from '../../topologies/index.js';
import { resolveInputs } from '../../topologies/inputs.js';
import { FakeExecutor } from '../helpers/fake-executor.js';

function spec(yaml: string, set: string[] = []): RunSpec {
  const experiment = parseExperiment(yaml, { set });
  return { experiment, inputs: resolveInputs(experiment, process.cwd()) };
}
const json = (o: unknown) => JSON.stringify(o);
const role = (r: TaskRequest) => r.meta.role;

async function run(s: RunSpec, answer: (r: TaskRequest) => string | { ok: false; text: string; error: { code: string; msg: string } }) {
  const ex = new FakeExecutor(answer);
  const out = await new Runner({ runId: 'r1', spec: s, executor: ex }).run();
  return { out, ex, nodes: [...ex.requests.values()].map((r) => r.meta.node) };
}

t.test('kappa matches hand-computed values', async (t) => {
  // Cohen: 2 raters, 10 items. Agreement 7/10; rater A: yes 6, no 4; rater B: yes 5, no 5.
  // pe = .6*.5 + .4*.5 = .5; kappa = (.7-.5)/(1-.5) = 0.4
  const a = ['y', 'y', 'y', 'y', 'y', 'y', 'n', 'n', 'n', 'n'];
  const b = ['y', 'y', 'y', 'y', 'n', 'n', 'y', 'n', 'n', 'n'];
  t.equal(cohenKappa(a, b)!.toFixed(6), '0.400000');
  t.equal(cohenKappa(a, a), 1);
  t.equal(cohenKappa(['x', 'x'], ['x', 'x']), null, 'undefined when chance agreement is 1');
  // Fleiss: 3 raters, 4 items, 2 categories.
  // rows (c1,c2): (3,0) (0,3) (2,1) (1,2): P_i = 1, 1, 1/3, 1/3 -> Pbar = 2/3
  // p1 = 6/12 = .5, p2 = .5 -> Pe = .5; kappa = (2/3 - .5) / .5 = 1/3
  const r = [['a', 'b', 'a', 'a'], ['a', 'b', 'a', 'b'], ['a', 'b', 'b', 'b']];
  t.equal(fleissKappa(r)!.toFixed(6), (1 / 3).toFixed(6));
  // Fleiss with 2 raters on Cohen's data differs (pooled marginals): check by hand too.
  // pooled p_y = 11/20, p_n = 9/20 -> Pe = .3025+.2025 = .505; Pbar = .7 -> (.7-.505)/.495
  t.equal(fleissKappa([a, b])!.toFixed(6), ((0.7 - 0.505) / 0.495).toFixed(6));
});

t.test('defensive JSON parsing finds the object in prose and rejects garbage', async (t) => {
  t.same(parseJsonObject('sure! ```json\n{"verdict": "approve", "x": "a}b"}\n``` done'), { verdict: 'approve', x: 'a}b' });
  t.equal(parseJsonObject('Once upon a time {there was'), undefined);
  t.equal(parseJsonObject('[1,2]'), undefined);
});

t.test('pipeline: feedback rounds stop at their bound', async (t) => {
  const s = spec('topology: pipeline\ninputs: {text: add two numbers}\nlimits: {rounds: 3}');
  const { out, nodes } = await run(s, (r) => (role(r) === 'tester' ? json({ verdict: 'reject', feedback: 'test 2 fails' }) : role(r) === 'typeguard' || role(r) === 'reviewer' ? json({ verdict: 'approve', feedback: '' }) : `${role(r)} output`));
  t.equal(out.verdict, 'rejected');
  t.match(out.reason, /rounds exhausted \(3\)/);
  t.equal(nodes.filter((n) => n.endsWith('/tester')).length, 3, 'the tester ran once per round');
  t.same(nodes.filter((n) => n.startsWith('pipeline/r2/')), ['pipeline/r2/worker', 'pipeline/r2/typeguard', 'pipeline/r2/tester'], 'round 2 restarts at the worker');
  t.notOk(nodes.includes('pipeline/r1/reviewer'), 'the reviewer never ran');
});

t.test('pipeline: a rejection with feedback reaches the worker, then approval ends it', async (t) => {
  const s = spec('topology: pipeline\ninputs: {text: task}\nlimits: {rounds: 3}');
  let seen = '';
  const { out } = await run(s, (r) => {
    if (role(r) === 'worker' && r.meta.node.includes('/r2/')) seen = r.prompt;
    if (r.meta.node === 'pipeline/r1/reviewer') return json({ verdict: 'reject', feedback: 'use a loop' });
    return role(r) === 'thinker' || role(r) === 'worker' ? `${r.meta.node} out` : json({ verdict: 'approve', feedback: '' });
  });
  t.equal(out.verdict, 'approved');
  t.equal(out.output, 'pipeline/r2/worker out');
  t.match(seen, /use a loop/);
});

t.test('pipeline: a garbage verdict counts as a rejection and is recorded', async (t) => {
  const s = spec('topology: pipeline\ninputs: {text: t}\nlimits: {rounds: 1}');
  const { out } = await run(s, (r) => (role(r) === 'typeguard' ? 'Once upon a time there was a cat' : 'x'));
  t.equal(out.verdict, 'rejected');
  t.match(JSON.stringify(out.details), /unparseable verdict: Once upon a time/);
});

t.test('strict-chain: STOP halts the chain mid-way and records why', async (t) => {
  const s = spec('topology: strict-chain\ninputs: {text: "call Ana at 555-1234"}');
  const { out, nodes } = await run(s, (r) => (role(r) === 'anonymizer'
    ? json({ action: 'STOP', reason: 'phone number cannot be masked', output: '' })
    : json({ action: 'CONTINUE', reason: '', output: 'ok' })));
  t.equal(out.verdict, 'stopped');
  t.match(out.reason, /STOP at anonymizer \(stage 2 of 4\): phone number cannot be masked/);
  t.same(nodes, ['chain/0-scanner', 'chain/1-anonymizer'], 'validator and auditor never ran');
});

t.test('strict-chain: a failed stage and garbage both stop (fail-closed)', async (t) => {
  const s = spec('topology: strict-chain\ninputs: {text: x}');
  const g = await run(s, (r) => (role(r) === 'validator' ? 'lalala' : json({ action: 'continue', reason: '', output: 'ok' })));
  t.equal(g.out.verdict, 'stopped');
  t.match(g.out.reason, /validator.*unparseable/);
  const f = await run(s, () => ({ ok: false, text: '', error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'boom' } }));
  t.match(f.out.reason, /STOP at scanner.*SWARM_ERR_TASK_FAILED/);
  const p = await run(s, () => json({ action: 'CONTINUE', reason: '', output: 'clean' }));
  t.equal(p.out.verdict, 'passed');
  t.equal(p.out.output, 'clean');
});

t.test('map-reduce: 2,000 chunks reduce exactly once per chunk', async (t) => {
  const items = Array.from({ length: 2000 }, (_, i) => `line ${i}`.padEnd(15, "."));
  const s = spec(`topology: map-reduce\nmap_reduce: {fan_in: 4}\ninputs: {chunk_chars: 16, text: ${json(items.join('\n'))}}`);
  t.equal(s.inputs.chunks.length, 2000);
  const consumed = new Map<string, number>();
  const { out, ex } = await run(s, (r) => {
    if (role(r) === 'mapper') return `M${r.meta.node.slice(4)}`;
    if (role(r) === 'reducer') {
      if (r.meta.node.startsWith('reduce/1/')) for (const m of r.prompt.matchAll(/M\d+/g)) consumed.set(m[0], (consumed.get(m[0]) ?? 0) + 1);
      return [...r.prompt.matchAll(/M\d+/g)].map((m) => m[0]).join(' ');
    }
    return json({ verdict: 'pass', reason: 'ok' });
  });
  t.equal(out.verdict, 'pass');
  t.equal(consumed.size, 2000);
  t.ok([...consumed.values()].every((n) => n === 1), 'each map output went into exactly one first-level reducer');
  t.equal(out.output.split(' ').length, 2000, 'the root holds every chunk once');
  // 2000 -> 500 -> 125 -> 32 -> 8 -> 2 -> 1
  t.same(out.details, { chunks: 2000, fan_in: 4, levels: 6, reducers: 668, failed_nodes: 0 });
  t.equal(ex.requests.size, 2000 + 668 + 1, 'no node submitted twice');
});

function arenaScores(table: number[][]) {
  return (r: TaskRequest) => (role(r) === 'contestant' ? `answer ${r.meta.node}` : json({ scores: table[Number(r.meta.node.split('/')[2])] }));
}

t.test('arena: rubric picks the judged winner and computes Cohen kappa', async (t) => {
  const s = spec('topology: arena\ninputs: {text: t}\nroles: {contestant: {agents: 4}, judge: {agents: 2}}');
  const { out } = await run(s, arenaScores([[3, 9, 5, 5], [4, 8, 5, 6]]));
  t.equal(out.verdict, 'winner');
  t.equal(out.details?.winner, 1);
  t.equal(out.output, 'answer arena/c1');
  // Items 4; agreement only on item 2 (5,5): po=.25; categories {3,9,5,5} vs {4,8,5,6}: pe = (2/4)*(1/4) = .125
  t.equal((out.details?.kappa as number).toFixed(6), ((0.25 - 0.125) / 0.875).toFixed(6));
  t.equal(out.details?.kappa_method, 'cohen');
});

t.test('arena: three judges use Fleiss kappa; a garbage judge is left out', async (t) => {
  const s = spec('topology: arena\ninputs: {text: t}\nroles: {contestant: {agents: 3}, judge: {agents: 4}}');
  const { out } = await run(s, (r) => (r.meta.node === 'arena/judge/3' ? 'the judge told a story' : arenaScores([[1, 2, 9], [1, 2, 9], [1, 3, 9]])(r)));
  t.equal(out.details?.winner, 2);
  t.equal(out.details?.judges_invalid, 1);
  t.equal(out.details?.kappa_method, 'fleiss');
  // rows: (1,1,1) (2,2,3) (9,9,9): P = 1, 1/3, 1 -> 7/9; totals 1:3 2:2 3:1 9:3 of 9 -> Pe = (9+4+1+9)/81 = 23/81
  t.equal((out.details?.kappa as number).toFixed(6), ((7 / 9 - 23 / 81) / (1 - 23 / 81)).toFixed(6));
});

t.test('arena: pairwise judging counts wins', async (t) => {
  const s = spec('topology: arena\narena: {mode: pairwise}\ninputs: {text: t}\nroles: {contestant: {agents: 3}, judge: {agents: 2}}');
  // contestant 2 beats everyone; 0 beats 1.
  const { out, nodes } = await run(s, (r) => {
    if (role(r) === 'contestant') return `answer ${r.meta.node}`;
    const [a, b] = r.meta.node.split('/')[3]!.split('v').map(Number);
    return json({ winner: b === 2 ? 'B' : a! < b! ? 'A' : 'B' });
  });
  t.equal(nodes.filter((n) => n.startsWith('arena/judge/')).length, 6);
  t.equal(out.details?.winner, 2);
  t.same(out.details?.wins, [2, 0, 4]);
  t.equal(out.details?.kappa, 1);
});

const debateYaml = (limits: string) => `topology: diamond-debate\ninputs: {text: sort a list}\ndebate: {stances: [fast, readable, safe]}\nlimits: {${limits}}`;
const turn = (verdict: string) => json({ verdict, argument: `I say ${verdict}` });

t.test('debate: every debater approving ends the rounds and merges', async (t) => {
  const { out, nodes } = await run(spec(debateYaml('rounds: 5')), (r) => (role(r) === 'debater' ? turn(r.meta.node.startsWith('debate/r2/') ? 'approve' : 'continue') : `${role(r)} text`));
  t.equal(out.verdict, 'approved');
  t.equal(out.output, 'merger text');
  t.notOk(nodes.some((n) => n.startsWith('debate/r3/')));
  t.ok(nodes.includes('debate/merge'));
});

t.test('debate: debaters see each other\'s arguments from the round before', async (t) => {
  let prompt = '';
  await run(spec(debateYaml('rounds: 2')), (r) => {
    if (r.meta.node === 'debate/r2/fast') prompt = r.prompt;
    return role(r) === 'debater' ? json({ verdict: 'continue', argument: `${r.meta.node} says hi` }) : 'x';
  });
  t.match(prompt, /readable: debate\/r1\/readable says hi/);
  t.match(prompt, /safe: debate\/r1\/safe says hi/);
});

t.test('debate: drift cap aborts and says why', async (t) => {
  const { out, nodes } = await run(spec(debateYaml('rounds: 10, drift_cap: 2')), (r) => (role(r) === 'debater' ? turn(r.meta.node.endsWith('/safe') ? 'continue' : 'drift') : 'x'));
  t.equal(out.verdict, 'aborted');
  t.match(out.reason, /drift cap: a majority flagged drift in 2 consecutive rounds/);
  t.notOk(nodes.includes('debate/merge'), 'no merge after an abort');
});

t.test('debate: turn cap aborts and says why', async (t) => {
  const { out } = await run(spec(debateYaml('rounds: 10, turns: 8')), (r) => (role(r) === 'debater' ? turn('continue') : 'x'));
  t.equal(out.verdict, 'aborted');
  t.match(out.reason, /turn cap: round 3 needs 3 more turns plus the merger; 7 of 8 used/);
});

t.test('debate: rounds without consensus still merge, verdict no-consensus; garbage counts as continue', async (t) => {
  const { out } = await run(spec(debateYaml('rounds: 2')), (r) => (role(r) === 'debater' ? 'Lily went to the park' : 'merged'));
  t.equal(out.verdict, 'no-consensus');
  t.equal(out.details?.parse_failures, 6);
});

t.test('star fans out one task per item', async (t) => {
  const s = spec('topology: star\ninputs: {items: [a, b, c]}');
  const { out, nodes } = await run(s, (r) => r.prompt.toUpperCase());
  t.same(nodes.sort(), ['star/0', 'star/1', 'star/2']);
  t.equal(out.output, 'A\n\nB\n\nC');
});

t.test('a run resumes from results alone: nothing finished runs again', async (t) => {
  const s = spec('topology: pipeline\ninputs: {text: t}\nlimits: {rounds: 2}');
  const answer = (r: TaskRequest) => (role(r) === 'reviewer' && r.meta.node.includes('/r1/') ? json({ verdict: 'reject', feedback: 'again' }) : role(r) === 'thinker' || role(r) === 'worker' ? 'w' : json({ verdict: 'approve', feedback: '' }));
  const ex = new FakeExecutor(answer);
  const first = await new Runner({ runId: 'same', spec: s, executor: ex }).run();
  const count = ex.requests.size;
  const again = await new Runner({ runId: 'same', spec: s, executor: ex }).run();
  t.equal(again.verdict, first.verdict);
  t.equal(ex.requests.size, count, 'the second runner reused every result');
});

t.test('requests carry deterministic ids, seeds and limits', async (t) => {
  const s = spec('topology: star\nseed: 7\ntemperature: 0\ninputs: {items: [a]}\nlimits: {max_tokens: 33, timeout_ms: 999}');
  const { ex } = await run(s, () => 'x');
  const r = [...ex.requests.values()][0]!;
  t.equal(r.id, 'r1:star:0');
  t.same(r.meta, { run: 'r1', node: 'star/0', role: 'agent' });
  t.equal(r.max_tokens, 33);
  t.equal(r.timeout_ms, 999);
  t.equal(r.temperature, 0);
  const again = await run(s, () => 'x');
  t.equal([...again.ex.requests.values()][0]!.seed, r.seed);
});

t.test('run folder: nodes.jsonl has every node; only the first artifacts.node_folders get a folder', async (t) => {
  const { RunFolder } = await import('../../topologies/artifacts.js');
  const { makePassport } = await import('../../topologies/passport.js');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const s = spec('topology: star\ninputs: {items: [a, b, c, d, e]}\nartifacts: {node_folders: 2}');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'folder-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const folder = await RunFolder.open(dir, s, await makePassport({ run: 'r1', experiment: s.experiment, swarmVersion: 'test' }));
  const out = await new Runner({ runId: 'r1', spec: s, executor: new FakeExecutor((r) => r.prompt), sink: folder }).run();
  await folder.close();
  t.equal(out.verdict, 'done');
  t.equal(fs.readdirSync(path.join(dir, 'nodes')).length, 2);
  const lines = fs.readFileSync(path.join(dir, 'nodes.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { node: string; output: string });
  t.same(lines.map((l) => l.node).sort(), ['star/0', 'star/1', 'star/2', 'star/3', 'star/4']);
  const result = JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8')) as { metrics: { nodes: number; failed: number } };
  t.equal(result.metrics.nodes, 5);
  t.match(fs.readFileSync(path.join(dir, 'report.md'), 'utf8'), /verdict: \*\*done\*\*/);
});

t.test('a run keeps at most limits.max_inflight nodes outstanding, and a full queue is retried', async (t) => {
  const s = spec('topology: star\ninputs: {items: [a, b, c, d, e, f, g, h, i, j, k, l]}\nlimits: {max_inflight: 3}');
  let outstanding = 0, peak = 0, refusals = 0;
  const ex = new FakeExecutor((r) => { outstanding--; return r.prompt; });
  const submit = ex.submit.bind(ex);
  ex.submit = async (tasks) => {
    if (refusals < 2) { refusals++; throw Object.assign(new Error('queue full'), { code: 'SWARM_ERR_QUEUE_FULL' }); }
    outstanding += tasks.length;
    peak = Math.max(peak, outstanding);
    return submit(tasks);
  };
  const out = await new Runner({ runId: 'w', spec: s, executor: ex }).run();
  t.equal(out.verdict, 'done');
  t.equal(out.output.split('\n\n').length, 12);
  t.equal(refusals, 2);
  t.ok(peak <= 3, `peak outstanding ${peak}`);
});
