import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, pidsMentioning, swarm, until, tempDir } from '../helpers/cli.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';

t.test('swarm up --agents 25 on stories260K (the default batched engine) answers 100 tasks and comes down clean', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  // A private copy, so that "no process mentions it" is not confused by other tests on the same model.
  const model = path.join(dir, 'stories260K.gguf');
  fs.copyFileSync(STORIES, model);
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '25', '--model', model, '--detach', '--json', '--state-dir', state], { timeoutMs: 240_000 });
  t.equal(up.code, 0, up.stderr);
  const summary = JSON.parse(up.stdout) as { agents: number; driver: string; ready_ms: number };
  t.equal(summary.driver, 'batched', 'the default engine: one batched engine, a sequence per agent');
  t.comment(`25 agents ready in ${summary.ready_ms} ms`);

  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, Array.from({ length: 100 }, (_, i) => JSON.stringify({ id: `s-${i}`, prompt: 'Once upon a time', max_tokens: 16, seed: i, temperature: 0 })).join('\n') + '\n');
  const sub = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state], { timeoutMs: 300_000 });
  t.equal(sub.code, 0, sub.stderr);
  const res = JSON.parse(sub.stdout) as { complete: boolean; tasks: { id: string; state: string; text: string; receipt?: { tokens_out?: number; worker?: string } }[] };
  t.equal(res.tasks.filter((x) => x.state === 'done').length, 100, 'all 100 done');
  t.ok(res.tasks.every((x) => x.text.trim().length > 0), 'every answer has text');
  t.ok(res.tasks.every((x) => (x.receipt?.tokens_out ?? 0) > 0), 'every receipt counts tokens');
  t.equal(new Set(res.tasks.map((x) => x.text)).size, 1, 'temperature 0 on one model: every worker gives the same story');
  const workers = new Set(res.tasks.map((x) => x.receipt?.worker));
  t.ok(workers.size > 5, `spread over ${workers.size} workers`);
  const s = await api<{ tasks: Record<string, number>; metrics: { duplicate_results: number } }>(state, 'GET', '/status');
  t.same(s.tasks, { queued: 0, leased: 0, done: 100, failed: 0 });
  t.equal(s.metrics.duplicate_results, 0);

  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
  t.ok(await until(() => pidsMentioning(dir).length === 0, 60_000), 'no hub, worker or engine left');
});
