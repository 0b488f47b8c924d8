import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { planPools, routeRoles } from '../../cli/commands/run-pools.js';
import { parseExperiment } from '../../topologies/index.js';
import { api, pidsMentioning, swarm, tempDir, until } from '../helpers/cli.js';
import { MODELS, STORIES, missingPrereq } from '../helpers/llama.js';

const SYNTH = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');

t.test('pools: one per (driver, model), each role routed by a cap; one pool needs no cap', async (t) => {
  const e = parseExperiment(JSON.stringify({
    topology: 'map-reduce', inputs: { text: 'x' },
    roles: { mapper: { agents: 3, driver: 'embedded', model: '/m/a.gguf' }, reducer: { driver: 'embedded', model: '/m/b.gguf', caps: ['big'] }, guard: {} },
  }));
  const pools = planPools(e, (r) => e.roles[r]?.model, { driver: 'embedded', model: '/m/a.gguf' });
  t.same(pools.map((p) => ({ roles: p.roles, agents: p.agents, caps: p.caps })), [
    { roles: ['mapper', 'guard'], agents: 4, caps: ['pool:embedded:a.gguf'] },
    { roles: ['reducer'], agents: 1, caps: ['pool:embedded:b.gguf', 'big'] },
  ], 'the guard names nothing and joins the default pool');
  const routed = routeRoles(e, pools);
  t.same(routed.roles.reducer!.caps, ['big', 'pool:embedded:b.gguf']);
  t.same(routed.roles.guard!.caps, ['pool:embedded:a.gguf']);
  t.equal(e.roles.guard!.caps, undefined, 'the parsed experiment is left as it was');
  t.same(planPools(e, () => undefined, { driver: 'embedded' }, 10).map((p) => p.agents), [10], 'one pool: --agents as given');
  t.same(pools.map((p) => p.agents), [4, 1]);
  t.same(planPools(e, (r) => e.roles[r]?.model, { driver: 'embedded', model: '/m/a.gguf' }, 10).map((p) => p.agents), [8, 2], '--agents shared out by pool size');
  const same = planPools(e, () => '/m/a.gguf', { driver: 'embedded' });
  t.equal(same.length, 1);
  t.equal(same[0]!.cap, undefined, 'one pool: no routing cap');
  t.same(same[0]!.caps, ['big'], 'but its workers have the caps a role asks for');
});

t.test('swarm run starts a worker pool per model and each role runs on its model (embedded, two models)', async (t) => {
  const prereq = !fs.existsSync(STORIES) || !fs.existsSync(SYNTH) ? { missing: `test models ${STORIES} and ${SYNTH} not found (set SWARM_TEST_MODELS)` } : {};
  if (missingPrereq(t, prereq)) return;
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const file = path.join(dir, 'mixed.yaml');
  fs.writeFileSync(file, [
    'name: mixed-models', 'topology: map-reduce', 'seed: 3',
    'inputs: {text: "Once upon a time there was a frog.\\nThe frog liked to sing.\\nOne day it rained.\\n", chunk_chars: 24}',
    `roles:`,
    `  mapper: {driver: embedded, model: ${STORIES}, prompt: "{{chunk}} In short,"}`,
    `  reducer: {driver: embedded, model: ${SYNTH}}`,
    `  guard: {driver: embedded, model: ${SYNTH}}`,
    'limits: {max_tokens: 12, timeout_ms: 120000}', '',
  ].join('\n'));
  const a = swarm(['run', file, '--state-dir', state, '--agents', '2'], { timeoutMs: 300_000 });
  t.match(a.stdout, /map-reduce\): (pass|fail)/, a.stderr);
  t.match(a.stderr, /starting 1 worker\(s\) for reducer, guard: embedded .*synth-llama-15M-shape-q8_0\.gguf \(caps pool:embedded:synth-llama-15M-shape-q8_0\.gguf\)/);

  const s = await api<{ workers: { id: string; caps: string[] }[] }>(state, 'GET', '/status');
  const caps = new Map(s.workers.map((w) => [w.id, w.caps]));
  // Pool caps only: the first pool runs on the default batched engine, whose workers also announce prompt-cache.
  t.same([...caps.values()].map((c) => c.filter((x) => x.startsWith('pool:')).join()).sort(), ['pool:embedded:stories260K.gguf', 'pool:embedded:synth-llama-15M-shape-q8_0.gguf'], 'one worker per model, each with its pool cap');

  const runs = fs.readdirSync(path.join(state, 'runs'));
  t.equal(runs.length, 1);
  const checkRouting = (run: string) => {
    const rd = path.join(state, 'runs', run);
    const nodes = fs.readFileSync(path.join(rd, 'nodes.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { node: string; role: string; metrics: { worker: string } });
    t.ok(nodes.length >= 4, `${nodes.length} nodes ran`);
    for (const n of nodes) {
      const want = n.role === 'mapper' ? 'pool:embedded:stories260K.gguf' : 'pool:embedded:synth-llama-15M-shape-q8_0.gguf';
      t.ok(caps.get(n.metrics.worker)?.includes(want), `${n.node} (${n.role}) ran on a ${want} worker`);
    }
    const passport = JSON.parse(fs.readFileSync(path.join(rd, 'passport.json'), 'utf8')) as { models: { role: string; path: string }[] };
    t.same(Object.fromEntries(passport.models.map((m) => [m.role, path.basename(m.path)])),
      { mapper: 'stories260K.gguf', reducer: 'synth-llama-15M-shape-q8_0.gguf', guard: 'synth-llama-15M-shape-q8_0.gguf' }, 'the passport names each role\'s model');
  };
  checkRouting(runs[0]!);

  // Against the swarm the first run started: the pools are found by their caps, no worker is started.
  const b = swarm(['run', file, '--state-dir', state], { timeoutMs: 300_000 });
  t.match(b.stdout, /map-reduce\): (pass|fail)/, b.stderr);
  t.notMatch(b.stderr, /starting|note:/);
  const second = fs.readdirSync(path.join(state, 'runs')).find((r) => r !== runs[0])!;
  checkRouting(second);

  // swarm down stops the pool's worker process too.
  const down = swarm(['down', '--state-dir', state]);
  t.equal(down.code, 0, down.stdout + down.stderr);
  t.ok(await until(() => pidsMentioning(state).length === 0, 20_000), 'no process of the swarm is left');
});
