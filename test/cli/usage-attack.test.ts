import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { alive, api, pidsMentioning, sleep, swarm, tempDir, until } from '../helpers/cli.js';
import { workerConfig } from '../../worker/index.js';
import { ORPHAN_EXIT_MAX_MS } from '../../worker/orphan-bounds.js';
import { STORIES, missingPrereq } from '../helpers/llama.js';

/**
 * Bad values of the orphan bound and of the batched engine's flash_attn and loop, as a careless user
 * types them: each is a usage error (exit 2, the option named) before any process starts, on
 * `swarm up`, `swarm hub --supervise` and `swarm worker`. Before, `up` waited its whole ready
 * timeout at "workers ready 0/N" and `hub --supervise` respawned the failing worker forever.
 */
const MODEL = STORIES;
const model = fs.existsSync(MODEL) ? {} : { missing: `test model ${MODEL} not found (set SWARM_TEST_MODELS)` };

function refused(t: Test, args: string[], dir: string, says: RegExp): void {
  const r = swarm([...args, '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(r.code, 2, `${args.join(' ')}: a usage error`);
  t.match(r.stderr, says, `${args.join(' ')}: says why`);
  t.notOk(fs.existsSync(path.join(dir, 'hub.json')), 'no hub was started');
  t.same(pidsMentioning(dir), [], 'no process left');
}

t.test('--orphan-exit-ms: 0 means never; negative, unparsable, empty and past the bound are refused', async (t) => {
  const dir = tempDir(t);
  for (const v of ['-1', 'abc', '', String(ORPHAN_EXIT_MAX_MS + 1)]) {
    refused(t, ['up', '--agents', '1', '--driver', 'echo', '--detach', `--orphan-exit-ms=${v}`], dir, /SWARM_ERR_CONFIG: .*--orphan-exit-ms/);
    refused(t, ['hub', '--supervise', '1', '--driver', 'echo', `--orphan-exit-ms=${v}`], dir, /SWARM_ERR_CONFIG: .*--orphan-exit-ms/);
    refused(t, ['worker', '--hub', '127.0.0.1:1', '--driver', 'echo', `--orphan-exit-ms=${v}`], dir, /SWARM_ERR_CONFIG: .*--orphan-exit-ms/);
  }
  // The CLI's bound is the worker config's: the largest the CLI takes, the config takes too.
  t.equal(workerConfig({ client: { orphanExitMs: ORPHAN_EXIT_MAX_MS } }).client.orphanExitMs, ORPHAN_EXIT_MAX_MS);
  t.throws(() => workerConfig({ client: { orphanExitMs: ORPHAN_EXIT_MAX_MS + 1 } }));
});

t.test('--driver-opt flash_attn and loop: a bad value is refused before anything starts', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  for (const opt of ['flash_attn=maybe', 'loop=fast', 'loop=DIRECT']) {
    const key = opt.slice(0, opt.indexOf('='));
    refused(t, ['up', '--agents', '2', '--model', MODEL, '--detach', '--driver-opt', opt], dir, new RegExp(`SWARM_ERR_CONFIG: batched option ${key}`));
    refused(t, ['hub', '--supervise', '1', '--model', MODEL, '--driver-opt', opt], dir, new RegExp(`SWARM_ERR_CONFIG: batched option ${key}`));
    refused(t, ['worker', '--hub', '127.0.0.1:1', '--driver', 'batched', '--model', MODEL, '--driver-opt', opt], dir, new RegExp(`SWARM_ERR_CONFIG: batched option ${key}`));
  }
  // An engine per worker: its options too (before, `up` waited its ready timeout at 0/N).
  refused(t, ['up', '--agents', '1', '--model', MODEL, '--engine', 'per-worker', '--detach', '--driver-opt', 'threads=abc'], dir, /SWARM_ERR_CONFIG: embedded option threads/);
  refused(t, ['up', '--agents', '1', '--driver', 'echo', '--detach', '--driver-opt', 'latency_ms=soon'], dir, /SWARM_ERR_CONFIG: echo option latency_ms/);
});

t.test('a worker under a live `swarm up` never exits for the orphan bound', async (t) => {
  const dir = tempDir(t);
  const up = swarm(['up', '--agents', '2', '--driver', 'echo', '--detach', '--orphan-exit-ms', '1000', '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(up.code, 0, up.stderr);
  const workersOf = () => pidsMentioning(dir).filter((p) => fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('\0worker\0'));
  const before = workersOf();
  t.ok(before.length >= 1, 'worker processes run');
  // Many times the bound (its check runs every second): parent (the hub) alive and linked.
  await sleep(5000);
  t.ok(before.every(alive), 'every worker process still runs');
  t.same(workersOf().sort(), before.sort(), 'none was respawned');
  await api(dir, 'POST', '/tasks', { id: 'after', prompt: 'still here' });
  t.ok(await until(async () => (await api<{ state: string }>(dir, 'GET', '/tasks/after')).state === 'done', 20_000, 100), 'a task still runs');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});
