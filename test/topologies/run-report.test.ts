import t from 'tap';
import { renderHtml, renderMarkdown, summarize, type NodeRecord, type RunReport } from '../../topologies/report.js';
import { answerOf } from '../../topologies/artifacts.js';
import { commonPrefix, graphSvg } from '../../topologies/svg.js';
import type { Passport } from '../../topologies/passport.js';
import type { RunOutcome } from '../../topologies/runner.js';

const passport = (topology: string, roles: string[]): Passport => ({
  run: 'r1', created_at: '2026-11-22T00:00:00Z', swarm_version: '0.1.0', experiment: 'exp', topology, seed: 1, temperature: 0,
  models: roles.map((role) => ({ role, path: '/m/stories260K.gguf', sha256: 'ab'.repeat(32), size: 10 })),
  drivers: [], engines: {}, host: { hostname: 'h', platform: 'linux', arch: 'x64', cpus: 2, cpu_model: 'cpu', mem_bytes: 1, node: 'v20' },
  config: {} as Passport['config'],
});
const node = (n: Partial<NodeRecord> & { node: string }): NodeRecord => ({ role: 'r', after: [], wave: 1, submitted_at: 1000, state: 'done', finished_at: 1100, duration_ms: 100, ...n });
const outcome = (o: Partial<RunOutcome>): RunOutcome => ({
  output: '', run: 'r1', progress: { run: 'r1', state: 'done', submitted: 0, done: 0, failed: 0, running: 0, tokens_out: 0, tokens_per_s: 0, elapsed_ms: 500 }, ...o,
});
const report = (p: Passport, nodes: NodeRecord[], o: RunOutcome): RunReport => ({ passport: p, outcome: o, nodes, metrics: summarize(nodes, 1000, o) });

t.test('structured answers are read for the graph and the table', async (t) => {
  t.equal(answerOf('{"verdict":"reject","feedback":"no"}'), 'reject');
  t.equal(answerOf('  {"action":"STOP","reason":"pii","output":""}'), 'STOP');
  t.equal(answerOf('{"scores":[3,4,5]}'), 'scores 3,4,5');
  t.equal(answerOf('Once upon a time {"verdict":"approve"}'), undefined, 'prose is not an answer');
  t.equal(answerOf('{not json'), undefined);
});

t.test('a pipeline report: labels without the shared prefix, a rejecting gate in amber, models listed once', async (t) => {
  const nodes = [
    node({ node: 'pipeline/r1/worker', role: 'worker' }),
    node({ node: 'pipeline/r1/typeguard', role: 'typeguard', after: ['pipeline/r1/worker'], verdict: 'reject' }),
  ];
  t.equal(commonPrefix(nodes), 'pipeline/r1/');
  const html = renderHtml(report(passport('pipeline', ['worker', 'typeguard']), nodes, outcome({ output: 'x', verdict: 'rejected', reason: 'typeguard rejected' })));
  t.match(html, />typeguard<\/text>/, 'the label leaves out pipeline/r1/');
  t.match(html, /fill="#ffb74d"/, 'the rejecting gate is amber');
  t.match(html, /class="legend"/);
  t.match(html, /<dt>model \(worker, typeguard\)<\/dt>/, 'one line for the shared model');
  t.match(html, /background:#c62828/, 'rejected is a red badge');
  t.match(renderMarkdown(report(passport('pipeline', ['worker']), nodes, outcome({ verdict: 'rejected' }))), /\| pipeline\/r1\/typeguard \| typeguard \| done \| reject \|/);
});

t.test('an arena report: the judges table marks the winner, the winner is outlined', async (t) => {
  const nodes = [node({ node: 'arena/c0' }), node({ node: 'arena/c1' }), node({ node: 'arena/judge/0', after: ['arena/c0', 'arena/c1'] })];
  const html = renderHtml(report(passport('arena', ['contestant']), nodes, outcome({
    output: 'frog', verdict: 'winner', reason: 'contestant 1 won',
    details: { winner: 1, winner_node: 'arena/c1', mode: 'rubric', scores: [[2, 5], [3, 4]], means: [2.5, 4.5], judges: 2, judges_invalid: 0, kappa: 0.1, kappa_method: 'cohen' },
  })));
  t.match(html, /<h2>Judges<\/h2>/);
  t.match(html, /<th>contestant 1 \(winner\)<\/th>/);
  t.match(html, /<td>judge 1<\/td><td>3<\/td><td class="win">4<\/td>/);
  t.match(html, /<td class="win">4\.50<\/td>/);
  t.match(html, /stroke="#f9a825"/, 'the winner is outlined in the graph');
  t.match(html, /outlined: arena\/c1/);
});

t.test('a cancelled run: cancelled nodes, their states counted, no output says why, the timeline reaches the end', async (t) => {
  const nodes = [node({ node: 'star/0' }), node({ node: 'star/1', state: 'cancelled', finished_at: undefined, duration_ms: undefined })];
  const r = report(passport('star', ['agent']), nodes, outcome({ verdict: 'cancelled', reason: 'enough' }));
  t.same({ nodes: r.metrics.nodes, done: r.metrics.done }, { nodes: 2, done: 1 }, 'a cancelled node has no latency');
  const html = renderHtml(r);
  t.match(html, /<dd>2 \(1 done, 1 cancelled\)<\/dd>/);
  t.match(html, /\(no output: cancelled, enough\)/);
  t.match(html, /background:#ef6c00/, 'cancelled is an amber badge');
  t.match(html, /<td>cancelled<\/td><td><\/td><td><\/td><td>-<\/td>/, 'no latency for a node that never finished');
  t.match(html, /0\.50 s<\/text>/, 'the timeline runs to the end of the run (500 ms)');
});

t.test('a tall column wraps into sub-columns of at most 12', async (t) => {
  const nodes = Array.from({ length: 30 }, (_, i) => node({ node: `star/${i}` }));
  const svg = graphSvg(nodes);
  const ys = new Set([...svg.matchAll(/<rect x="\d+" y="(\d+)"/g)].map((m) => m[1]));
  const xs = new Set([...svg.matchAll(/<rect x="(\d+)"/g)].map((m) => m[1]));
  t.equal(ys.size, 10, '30 nodes in 3 sub-columns of 10 rows');
  t.equal(xs.size, 3);
  t.ok(!svg.includes('font-weight="600">star/') && svg.includes('font-weight="600">29</text>'), 'labels without the shared prefix');
  t.ok(svg.indexOf('>2</text>') < svg.indexOf('>10</text>'), 'in natural order');
});

t.test('the run folder records a structured node that gave no usable answer as "no answer"', async (t) => {
  const { RunFolder } = await import('../../topologies/artifacts.js');
  const { parseExperiment } = await import('../../topologies/index.js');
  const experiment = parseExperiment(JSON.stringify({ topology: 'map-reduce', inputs: { text: 'x' } }));
  const spec = { experiment, inputs: { text: 'x', items: [], chunks: [] } };
  const dir = t.testdir();
  const f = await RunFolder.open(dir, spec, passport('map-reduce', ['guard']));
  const req = (id: string, schema: boolean) => ({ id, prompt: 'p', meta: { run: 'r1', node: id, role: 'guard' }, ...(schema ? { json_schema: { type: 'object' } } : {}) });
  f.submitted({ node: 'guard', role: 'guard', prompt: 'p', input: {} }, req('guard', true), 1000);
  f.submitted({ node: 'map/0', role: 'mapper', prompt: 'p', input: {} }, req('map/0', false), 1000);
  f.finished('guard', { ok: true, text: 'Once upon a time' }, 1100);
  f.finished('map/0', { ok: true, text: 'Once upon a time' }, 1100);
  t.equal(f.nodes.get('guard')!.verdict, 'no answer');
  t.equal(f.nodes.get('map/0')!.verdict, undefined, 'free text is no verdict where none was asked for');
  await f.close();
});
