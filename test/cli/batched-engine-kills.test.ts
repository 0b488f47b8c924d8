import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, pidsMentioning, swarm, swarmBg, until, tempDir } from '../helpers/cli.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';

/**
 * The batched engine is killed (SIGKILL, from its own test hook: drivers/batched/crash-hook.ts) at
 * each step of its life in turn: while it loads for `swarm up`, mid-generation, while the engine
 * started after that loads, once it listens, once it has given a worker its sequence. Every task
 * still ends, done, once: a start that fails hands the task back, a new engine is started.
 */
t.test('the batched engine killed at each step of its start and mid-generation: every task ends, none lost or duplicated', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const marks = path.join(dir, 'crashes');
  fs.mkdirSync(marks);
  const model = path.join(dir, 'stories260K.gguf');
  fs.copyFileSync(STORIES, model);
  const steps = ['load', 'chat', 'load', 'listen', 'greet'];
  const env = { SWARM_TEST_ENGINE_CRASH: `${steps.join(',')}@${marks}` };
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '4', '--engine', 'batched', '--model', model, '--detach', '--json', '--state-dir', state], { env, timeoutMs: 120_000 });
  t.equal(up.code, 0, `up is ready though its first engine died while it loaded: ${up.stdout}${up.stderr}`);

  const file = path.join(dir, 'tasks.jsonl');
  const n = 12;
  fs.writeFileSync(file, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `k-${i}`, prompt: 'Once upon a time', max_tokens: 200, temperature: 0, seed: i, max_attempts: 6 })).join('\n') + '\n');
  const sub = swarmBg(['submit', '--file', file, '--wait', '--json', '--state-dir', state], { env });
  // Bounded: a task that never ends fails here, not at the file's timeout.
  const code = await new Promise<number | null | 'still waiting'>((r) => { sub.child.once('exit', r); setTimeout(() => r('still waiting'), 150_000).unref(); });
  if (code === 'still waiting') sub.child.kill('SIGKILL');
  t.equal(code, 0, 'submit --wait ended: every task ended');
  t.same(fs.readdirSync(marks).sort(), steps.map((s, i) => `crashed-${i}-${s}`).sort(), 'the engine died at every step');
  const line = sub.output().split('\n').find((l) => l.startsWith('{"complete"'));
  const res = JSON.parse(line ?? '{"tasks":[]}') as { tasks: { id: string; state: string; text: string }[] };
  const done = res.tasks.filter((x) => x.state === 'done');
  t.equal(n - new Set(done.map((x) => x.id)).size, 0, 'lost: 0');
  t.equal(done.length - new Set(done.map((x) => x.id)).size, 0, 'duplicated: 0 in the answer');
  t.equal(new Set(done.map((x) => x.text)).size, 1, 'temperature 0: retried tasks give the same text');
  const s = await api<{ tasks: Record<string, number>; metrics: { duplicate_results: number } }>(state, 'GET', '/status');
  t.same(s.tasks, { queued: 0, leased: 0, done: n, failed: 0 }, 'no lease left held');
  t.equal(s.metrics.duplicate_results, 0, 'no duplicate results');

  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
  t.ok(await until(() => pidsMentioning(dir).length === 0, 60_000), 'no hub, worker or engine left');
});
