import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, pidsMentioning, swarm, swarmBg, until, tempDir } from '../helpers/cli.js';
import { STORIES, alive, missingPrereq } from '../helpers/llama.js';

t.test('swarm up --engine batched: kill -9 of the engine mid-generation loses and duplicates nothing', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const model = path.join(dir, 'stories260K.gguf');
  fs.copyFileSync(STORIES, model);
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '4', '--engine', 'batched', '--model', model, '--detach', '--json', '--state-dir', state], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);
  const summary = JSON.parse(up.stdout) as { driver: string; engine: string };
  t.same([summary.driver, summary.engine], ['batched', 'batched']);
  const status = await api<{ engine: { mode: string }; workers: { driver: string }[] }>(state, 'GET', '/status');
  t.equal(status.engine.mode, 'batched', 'status names the engine');
  const pidFile = fs.readdirSync(path.join(state, 'engines')).find((f) => f.endsWith('.pid'))!;
  const engine = Number(fs.readFileSync(path.join(state, 'engines', pidFile), 'utf8'));
  t.ok(alive(engine), 'one engine runs');

  const file = path.join(dir, 'tasks.jsonl');
  const n = 12;
  fs.writeFileSync(file, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `k-${i}`, prompt: 'Once upon a time', max_tokens: 300, temperature: 0, seed: i })).join('\n') + '\n');
  const sub = swarmBg(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  t.ok(await until(async () => (await api<{ tasks: { leased: number } }>(state, 'GET', '/status')).tasks.leased > 0, 60_000), 'tasks running');
  process.kill(engine, 'SIGKILL');
  // Bounded: a submit that never ends fails here, not at the file's timeout (it took 20-30 s here
  // at load 10-20; batched-engine-kills.test.ts kills the engine at every step of its start too).
  const code = await new Promise<number | null | 'still waiting'>((r) => { sub.child.once('exit', r); setTimeout(() => r('still waiting'), 150_000).unref(); });
  if (code === 'still waiting') sub.child.kill('SIGKILL');
  t.equal(code, 0, 'submit --wait ended well');
  const res = JSON.parse(sub.output().split('\n').find((l) => l.startsWith('{"complete"'))!) as { tasks: { id: string; state: string; text: string }[] };
  t.equal(res.tasks.filter((x) => x.state === 'done').length, n, 'every task done: none lost');
  t.equal(new Set(res.tasks.map((x) => x.id)).size, n, 'each once');
  t.equal(new Set(res.tasks.map((x) => x.text)).size, 1, 'temperature 0: retried tasks give the same text');
  const s = await api<{ tasks: Record<string, number>; metrics: { duplicate_results: number } }>(state, 'GET', '/status');
  t.same(s.tasks, { queued: 0, leased: 0, done: n, failed: 0 });
  t.equal(s.metrics.duplicate_results, 0, 'no duplicate results');
  const now = Number(fs.readFileSync(path.join(state, 'engines', pidFile), 'utf8'));
  t.not(now, engine, 'a new engine took over');

  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
  t.ok(await until(() => pidsMentioning(dir).length === 0, 60_000), 'no hub, worker or engine left');
});

t.test('a prompt longer than the context fails at once with CONTEXT_EXCEEDED; the engine answers the next task', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '2', '--model', STORIES, '--driver-opt', 'ctx=64', '--detach', '--state-dir', state], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);
  const file = path.join(dir, 'tasks.jsonl');
  // Far past 64 tokens: node-llama-cpp alone would cut the start and answer from the end.
  const tasks = [{ id: 'long', prompt: 'Once upon a time there was a little dog. '.repeat(40) }, { id: 'short', prompt: 'Once upon a time', max_tokens: 8 }];
  fs.writeFileSync(file, tasks.map((x) => JSON.stringify(x)).join('\n') + '\n');
  const sub = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state], { timeoutMs: 120_000 });
  const res = JSON.parse(sub.stdout) as { tasks: { id: string; state: string; text?: string; error?: { code: string; msg: string } }[] };
  const long = res.tasks.find((x) => x.id === 'long')!;
  const short = res.tasks.find((x) => x.id === 'short')!;
  t.equal(long.state, 'failed', 'the long prompt failed');
  t.equal(long.error?.code, 'SWARM_ERR_CONTEXT_EXCEEDED', long.error?.msg ?? '');
  // node-llama-cpp rounds a context up (64 became 256 here): the message gives the size in force.
  t.match(long.error?.msg ?? '', /prompt is \d+ tokens and the engine's context \d+ tokens per sequence/, 'the message names both sizes');
  t.equal(short.state, 'done', 'the next task is answered');
  t.ok((short.text ?? '').length > 0, 'with text');
  const rec = await api<{ attempts: number }>(state, 'GET', '/tasks/long');
  t.equal(rec.attempts, 1, 'not retried: another attempt would fail the same way');
});

t.test('swarm up --driver batched: every worker gets a sequence (more workers than the default 8); too few sequences is refused at once', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const dir = tempDir(t);
  const model = path.join(dir, 'stories260K.gguf');
  fs.copyFileSync(STORIES, model);
  const few = swarm(['up', '--agents', '10', '--driver', 'batched', '--driver-opt', 'sequences=4', '--model', model, '--detach', '--json', '--state-dir', path.join(dir, 'few')]);
  t.equal(few.code, 2, 'exit 2: a configuration error');
  t.match(JSON.parse(few.stdout).error, { code: 'SWARM_ERR_CONFIG', msg: /sequences=4 is fewer than the 10 worker/ });
  t.same(pidsMentioning(path.join(dir, 'few')), [], 'nothing started');
  t.notOk(fs.existsSync(path.join(dir, 'few')), 'nothing written: no state directory');

  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  // ctx=512: 10 sequences of it stay within the cells for which `auto` turns flash attention off in a unified cache.
  const up = swarm(['up', '--agents', '10', '--driver', 'batched', '--driver-opt', 'ctx=512', '--model', model, '--detach', '--json', '--state-dir', state], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);
  t.equal((JSON.parse(up.stdout) as { engine: string }).engine, 'batched', 'up names the engine it runs');
  const file = path.join(dir, 'tasks.jsonl');
  // One task each, all at once: before, workers 9 and 10 waited for a sequence for ever, holding theirs.
  fs.writeFileSync(file, Array.from({ length: 10 }, (_, i) => JSON.stringify({ id: `s-${i}`, prompt: 'Once upon a time', max_tokens: 1, temperature: 0 })).join('\n') + '\n');
  const sub = swarm(['submit', '--file', file, '--wait', '--json', '--timeout', '60000', '--state-dir', state], { timeoutMs: 90_000 });
  t.equal(sub.code, 0, sub.stderr);
  const res = JSON.parse(sub.stdout) as { complete: boolean; tasks: { state: string; worker?: string }[] };
  t.equal(res.tasks.filter((x) => x.state === 'done').length, 10, 'all ten answered');
  t.equal(new Set(res.tasks.map((x) => x.worker)).size, 10, 'each by its own worker: all ten hold a sequence');
  // What the engine resolved, not the option as given: heads of 8 run scalar on every CPU, so off.
  const st = swarm(['status', '--state-dir', state]);
  t.match(st.stdout, /^engine\s+batched; 10 sequences of 512 tokens, KV (unified|per sequence), flash attention off \(auto: head size 8 /m, st.stdout);
  const exp = path.join(dir, 'one.yaml');
  fs.writeFileSync(exp, 'name: fa-passport\ntopology: star\ninputs: {items: [a]}\nroles: {agent: {prompt: "say {{item}}", max_tokens: 2}}\n');
  const run = swarm(['run', exp, '--state-dir', state, '--json'], { timeoutMs: 90_000 });
  t.equal(run.code, 0, run.stderr + run.stdout);
  const pass = JSON.parse(fs.readFileSync(path.join((JSON.parse(run.stdout) as { dir: string }).dir, 'passport.json'), 'utf8')) as { engines: Record<string, string> };
  t.match(pass.engines, { swarm_engine: 'batched', flash_attention: /^off \(auto: head size 8 /, batched_engine: /^10 sequences of 512 tokens/ }, `the passport too: ${JSON.stringify(pass.engines)}`);
});
