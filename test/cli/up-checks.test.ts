import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { Agent } from '../../worker/index.js';
import type { Driver } from '../../drivers/index.js';
import { quiet, startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { swarm, tempDir, pidsMentioning } from '../helpers/cli.js';

t.test('swarm up --model notes.txt fails at once with a clear error, and starts nothing', async (t) => {
  const dir = tempDir(t);
  const notes = path.join(dir, 'notes.txt');
  fs.writeFileSync(notes, 'shopping: milk, eggs\n');
  const state = path.join(dir, 'state');
  const up = swarm(['up', '--agents', '1', '--model', notes, '--detach', '--json', '--state-dir', state]);
  t.equal(up.code, 2, 'exit 2: a configuration error, not ready + 0');
  t.match(JSON.parse(up.stdout).error, { code: 'SWARM_ERR_CONFIG', msg: /not a GGUF model file/ });
  t.same(pidsMentioning(state), [], 'no process started');
});

t.test('a task without max_tokens gets the hub\'s default (512, or --max-tokens); one that gives it keeps it', async (t) => {
  const def = await startHub();
  t.teardown(def.stop);
  await def.hub.submit([{ id: 'a', prompt: 'p' }, { id: 'b', prompt: 'p', max_tokens: 9000 }]);
  t.equal(def.hub.store.queue.get('a')!.spec.max_tokens, 512);
  t.equal(def.hub.store.queue.get('b')!.spec.max_tokens, 9000);
  const set = await startHub({ defaultMaxTokens: 3 });
  t.teardown(set.stop);
  const pool = startPool(set.addr, 1);
  t.teardown(pool.stop);
  t.ok(await waitWorkers(set.hub, 1));
  await set.hub.submit([{ id: 'c', prompt: 'one two three four five six seven' }]);
  t.ok(await waitTasks(set.hub, 1));
  const text = set.hub.store.queue.get('c')!.result!.text;
  t.ok(text.split(/\s+/).filter(Boolean).length <= 3, `the generation was bounded: ${JSON.stringify(text)}`);
});

t.test('engine start failures do not use up task attempts: the task waits for an engine that starts', async (t) => {
  const { hub, addr, stop } = await startHub({ maxAttempts: 1 });
  let starts = 0;
  // An engine that fails its first 3 starts (a port taken, a model still being copied), then works.
  const driver: Driver = {
    name: 'flaky-start', pids: () => [],
    async start() { if (++starts <= 3) throw new Error(`start ${starts} failed`); },
    async stop() {},
    async *chat(prompt: string) { yield `ok: ${prompt}`; },
  };
  const agent = new Agent({ id: 'flaky', driver, locate: async () => addr }, quiet);
  void agent.run();
  t.teardown(async () => { await agent.stop('test over'); await stop(); });
  t.ok(await waitWorkers(hub, 1));
  await hub.submit([{ id: 'x', prompt: 'hi' }]);
  t.ok(await waitTasks(hub, 1, 30_000), 'the task finished');
  const rec = hub.store.queue.get('x')!;
  t.equal(rec.state, 'done', `done, not failed after its one attempt: ${JSON.stringify(rec.error)}`);
  t.equal(rec.result?.text, 'ok: hi');
  t.equal(rec.attempts, 1, 'the failed starts used no attempt');
  t.ok(starts >= 4, `the engine was started again (${starts} starts)`);
});
