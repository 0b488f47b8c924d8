import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExperimentError, loadExperiment, parseExperiment, resolveInputs } from '../../topologies/index.js';

const bad = (text: string, set?: string[]) => {
  try { parseExperiment(text, { source: 'exp.yaml', set }); } catch (e) { return e as ExperimentError; }
  throw new Error('expected an error');
};

t.test('a bad experiment names the line and the field', async (t) => {
  const e = bad('name: demo\ntopology: pipeline\ninputs:\n  text: hello\nlimits:\n  rounds: 0\n  turnz: 3\n');
  t.ok(e instanceof ExperimentError);
  t.equal(e.code, 'SWARM_ERR_CONFIG');
  t.match(e.message, /^exp\.yaml:6:3: limits\.rounds: .*>=1/m);
  t.match(e.message, /^exp\.yaml:7:3: limits\.turnz: unknown field "turnz"/m);
  t.same(e.issues.map((i) => i.line), [6, 7]);
});

t.test('typos in nested fields, unknown roles and topologies are located', async (t) => {
  t.match(bad('topology: arena\nroles:\n  contestant:\n    agents: 3\n    promt: hi\ninputs: {text: x}').message, /exp\.yaml:5:5: roles\.contestant\.promt: unknown field/);
  t.match(bad('topology: stars\ninputs: {text: x}').message, /exp\.yaml:1:1: topology: .*"star"/);
  t.match(bad('topology: pipeline\ninputs: {text: x}\nroles:\n  judge: {prompt: x}').message, /exp\.yaml:4:3: roles\.judge: "judge" is not a role of pipeline/);
  t.match(bad('topology: pipeline\ninputs: [ unclosed').message, /exp\.yaml:2:\d+: .*not valid YAML/);
  t.match(bad('topology: map-reduce\nroles:\n  mapper: {agents: 2}').message, /inputs: give inputs\.text/);
  t.match(bad('{"topology": "star", "inputs": {"items": ["a"]}, "seed": "x"}').message, /exp\.yaml:1:\d+: seed: .*expected number/);
  t.match(bad('topology: pipeline\ninputs: {text: x}\npipeline:\n  gates: {tester: worker, reviewer: tester}').message, /pipeline\.gates\.reviewer: cannot send work back to "tester": it is a gate/);
});

t.test('--set overrides dotted paths and its errors name the override', async (t) => {
  const e = parseExperiment('topology: star\ninputs: {text: x}', { set: ['limits.rounds=5', 'roles.agent.agents=3', 'name=demo run'] });
  t.equal(e.limits.rounds, 5);
  t.equal(e.roles.agent?.agents, 3);
  t.equal(e.name, 'demo run');
  t.match(bad('topology: star\ninputs: {text: x}', ['limits.rounds=abc']).message, /^--set limits\.rounds: limits\.rounds: .*expected number/);
});

t.test('role defaults are filled in and the result is frozen', async (t) => {
  const e = parseExperiment('topology: pipeline\ninputs: {text: x}\nroles:\n  worker: {agents: 2, prompt: "do {{input}}"}');
  t.equal(e.roles.worker?.prompt, 'do {{input}}');
  t.equal(e.roles.worker?.agents, 2);
  t.match(e.roles.reviewer?.prompt, /Solution: \{\{work\}\}/);
  t.ok(e.roles.reviewer?.json_schema, 'gates have a JSON schema');
  t.ok(Object.isFrozen(e.roles));
});

t.test('inputs: a file and a folder relative to the experiment', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exp-'));
  fs.mkdirSync(path.join(dir, 'docs/sub'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'docs/b.md'), 'bee');
  fs.writeFileSync(path.join(dir, 'docs/sub/a.md'), 'ay');
  fs.writeFileSync(path.join(dir, 'docs/.hidden'), 'no');
  fs.writeFileSync(path.join(dir, 'docs/c.txt'), 'sea');
  fs.writeFileSync(path.join(dir, 'exp.yaml'), 'topology: star\ninputs:\n  folder: docs\n  extensions: [.md]\n');
  const e = loadExperiment(path.join(dir, 'exp.yaml'));
  const inp = resolveInputs(e, dir);
  t.same(inp.items, ['bee', 'ay']);
  t.same(inp.chunks.map((c) => c.source), ['docs/b.md', 'docs/sub/a.md']);
  t.throws(() => loadExperiment(path.join(dir, 'nope.yaml')), { code: 'SWARM_ERR_CONFIG' });
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
});
