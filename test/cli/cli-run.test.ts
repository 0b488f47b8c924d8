import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hubFile, swarm } from '../helpers/cli.js';

t.test('swarm run: a bad experiment names line and field, exits 2, and starts nothing', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-run-bad-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'bad.yaml');
  fs.writeFileSync(file, 'topology: pipeline\ninputs: {text: x}\nlimits:\n  roundz: 2\n');
  const r = swarm(['run', file, '--state-dir', path.join(dir, 'state')]);
  t.equal(r.code, 2, r.stderr);
  t.match(r.stderr, /SWARM_ERR_CONFIG: .*bad\.yaml:4:3: limits\.roundz: unknown field "roundz"/);
  t.notOk(fs.existsSync(path.join(dir, 'state', 'hub.json')), 'no swarm was started');
  t.notOk(fs.existsSync(path.join(dir, 'state', 'runs')), 'no run was recorded');
});

t.test('swarm run starts a swarm, runs, replays; swarm runs ls/show/compare read the folders', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-run-'));
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); fs.rmSync(dir, { recursive: true, force: true }); });
  const file = path.join(dir, 'star.yaml');
  fs.writeFileSync(file, 'name: cli-star\ntopology: star\ninputs: {items: [alpha, beta, gamma]}\nroles: {agent: {prompt: "say {{item}}"}}\n');
  const a = swarm(['run', file, '--state-dir', state, '--agents', '2', '--driver', 'echo', '--json'], { timeoutMs: 180_000 });
  t.equal(a.code, 0, a.stderr);
  const va = JSON.parse(a.stdout) as { run: string; state: string; outcome: { verdict: string; output: string }; dir: string };
  t.equal(va.state, 'done');
  t.equal(va.outcome.verdict, 'done');
  t.equal(va.outcome.output, 'echo: say alpha\n\necho: say beta\n\necho: say gamma');
  t.ok(hubFile(state), 'a swarm was started for the run and keeps running');
  for (const f of ['passport.json', 'events.jsonl', 'nodes.jsonl', 'report.md', 'report.html', 'result.json']) t.ok(fs.existsSync(path.join(va.dir, f)), f);
  const pass = JSON.parse(fs.readFileSync(path.join(va.dir, 'passport.json'), 'utf8')) as { engines: Record<string, string> };
  t.equal(pass.engines.swarm_engine, 'per-worker', 'the passport names the engine mode, as swarm status does (echo workers: one driver each)');

  const b = swarm(['run', '--replay', va.run, '--state-dir', state, '--json']);
  t.equal(b.code, 0, b.stderr);
  const vb = JSON.parse(b.stdout) as { run: string; outcome: { output: string } };
  t.not(vb.run, va.run);
  t.equal(vb.outcome.output, va.outcome.output, 'the replay gives the same output');

  const rep = swarm(['run', file, '--state-dir', state, '--repeat', '2', '--set', 'seed=5', '--json']);
  t.equal(rep.code, 0, rep.stderr);
  const runs = (JSON.parse(rep.stdout) as { runs: { run: string }[] }).runs;
  t.equal(runs.length, 2);
  const seeds = runs.map((r) => (JSON.parse(fs.readFileSync(path.join(state, 'runs', r.run, 'passport.json'), 'utf8')) as { seed: number }).seed);
  t.same(seeds, [5, 6]);

  const ls = swarm(['runs', 'ls', '--state-dir', state, '--json']);
  t.equal(ls.code, 0);
  t.equal((JSON.parse(ls.stdout) as { runs: unknown[] }).runs.length, 4);
  const show = swarm(['runs', 'show', va.run, '--state-dir', state]);
  t.match(show.stdout, /# Run .*cli-star \(star\)/);
  t.match(show.stdout, /verdict: \*\*done\*\*/);
  const cmp = swarm(['runs', 'compare', va.run, vb.run, '--state-dir', state]);
  t.equal(cmp.code, 0, cmp.stderr);
  t.match(cmp.stdout, /verdict\s+done\s+done\s+same/);
  t.match(cmp.stdout, /nodes\s+3\s+3\s+\+0/);
  t.match(cmp.stdout, /output .* same/);
  const missing = swarm(['runs', 'show', 'nope', '--state-dir', state]);
  t.equal(missing.code, 2);
});
