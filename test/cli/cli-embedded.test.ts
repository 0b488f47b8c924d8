import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, pidsMentioning, swarm, until, tempDir } from '../helpers/cli.js';

t.test('swarm up with no driver or model: the llama.cpp driver (batched engine) on the demo model, offline, then down leaves nothing', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const cache = path.join(dir, 'cache');
  // A fresh machine: nothing cached, no SWARM_MODEL.
  const env = { XDG_CACHE_HOME: cache, SWARM_MODEL: '' };
  t.teardown(() => { swarm(['down', '--state-dir', state], { env }); });

  const up = swarm(['up', '--agents', '4', '--detach', '--state-dir', state], { env });
  t.equal(up.code, 0, up.stderr);
  t.match(up.stderr, /random weights, so its text is noise/, 'says plainly that the demo model makes noise');
  t.match(up.stderr, /--model path\/to\/model\.gguf/, 'and how to use a real model');
  t.equal(up.stderr.match(/text is noise/g)?.length, 1, 'once, not per worker');
  t.match(up.stdout, /engine\s+batched/, 'the default engine: one batched engine for the llama.cpp driver');
  const models = fs.readdirSync(path.join(cache, 'swarm', 'models'));
  t.equal(models.length, 1, `one demo model written to the cache: ${models.join(', ')}`);
  t.match(up.stdout, path.join(cache, 'swarm', 'models', models[0]!), 'the summary names the model');

  const status = await api<{ workers: { driver: string }[] }>(state, 'GET', '/status');
  t.equal(status.workers.length, 4, '4 workers connected');
  t.ok(status.workers.every((w) => w.driver === 'batched'), 'all on the batched engine');

  const sub = swarm(['submit', 'Once upon a time', '--wait', '--max-tokens', '24', '--state-dir', state], { env });
  t.equal(sub.code, 0, sub.stderr);
  t.ok(sub.stdout.trim().length > 0, `an answer (noise): ${JSON.stringify(sub.stdout.trim())}`);
  const unbounded = swarm(['submit', 'hello', '--wait', '--state-dir', state], { env, timeoutMs: 120_000 });
  t.equal(unbounded.code, 0, `a task without max tokens ends too: ${unbounded.stderr}`);

  const down = swarm(['down', '--state-dir', state, '--json'], { env });
  t.equal(down.code, 0, down.stderr);
  // Engines mention the model path (under `dir`), workers and hub the state dir (under `dir`).
  t.ok(await until(() => pidsMentioning(dir).length === 0, 60_000), 'no hub, worker or engine process is left');
  t.same(pidsMentioning(dir), []);
});
