import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { alive, swarm, tempDir } from '../helpers/cli.js';
import { ensureDemoModel } from '../../drivers/demo-model/index.js';
import { machineRam } from '../../deploy/plan/index.js';


/** The pids in a state dir's batched-engine pid files. */
function enginePids(state: string): number[] {
  const dir = path.join(state, 'engines');
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((n) => n.endsWith('.pid')).map((n) => Number(fs.readFileSync(path.join(dir, n), 'utf8')));
}

for (const engine of ['batched', 'per-worker']) t.test(`a model that does not load (${engine}): up is not ready, status names the error, tasks fail at once with it`, async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  // Its header is whole (valid magic, metadata, tensor infos); its tensor data is cut short.
  const broken = path.join(dir, 'truncated.gguf');
  const whole = fs.readFileSync(await ensureDemoModel());
  fs.writeFileSync(broken, whole.subarray(0, whole.length - 100_000));
  t.teardown(() => { swarm(['down', '--state-dir', state]); });

  const up = swarm(['up', '--agents', '2', '--engine', engine, '--detach', '--json', '--model', broken, '--state-dir', state]);
  t.not(up.code, 0, 'up does not report ready');
  const err = JSON.parse(up.stdout).error;
  t.equal(err.code, 'SWARM_ERR_ENGINE_START');
  t.match(err.msg, /could not load/);
  t.match(err.msg, /not within the file bounds|failed to load/i, 'with the engine\'s own reason');

  const st = swarm(['status', '--state-dir', state]);
  t.equal(st.code, 0, st.stderr);
  t.match(st.stdout, new RegExp(`engine +${engine}; FAILED to start on \\d worker\\(s\\): w-\\d: .*could not load`));
  const sj = JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout);
  t.match(sj.engine.error, /could not load/);
  t.ok(sj.workers.every((w: { engine?: string }) => w.engine === 'failed'), 'every worker reports its engine failed');

  const sub = swarm(['submit', 'Once upon a time', '--wait', '--json', '--timeout', '60000', '--state-dir', state], { timeoutMs: 90_000 });
  const res = JSON.parse(sub.stdout);
  t.equal(res.tasks.length, 1);
  t.equal(res.tasks[0].state, 'failed', 'the task failed rather than wait in the queue');
  t.match(JSON.stringify(res.tasks[0]), /SWARM_ERR_ENGINE_START/);
  t.match(JSON.stringify(res.tasks[0]), /could not load/);

  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
});

t.test('up --engine per-worker runs an engine per worker, and status says per-worker', async (t) => {
  const state = path.join(tempDir(t), 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '2', '--engine', 'per-worker', '--detach', '--json', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  t.equal(JSON.parse(up.stdout).engine, 'per-worker');
  const s = JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout);
  t.equal(s.engine.mode, 'per-worker', 'the hub runs the engine mode asked for');
  t.same(s.workers.map((w: { driver: string }) => w.driver), ['embedded', 'embedded']);
  t.equal(new Set(s.workers.map((w: { pid: number }) => w.pid)).size, 2, 'a worker process each');
  t.same(enginePids(state), [], 'no batched engine was started');
  const sub = swarm(['submit', 'Once upon a time', '--max-tokens', '8', '--wait', '--json', '--state-dir', state]);
  t.equal(sub.code, 0, sub.stderr);
  t.equal(JSON.parse(sub.stdout).tasks[0].state, 'done');
});

t.test('up refuses more agents than swarm plan says fit, with the plan\'s figure; --force overrides', async (t) => {
  const state = path.join(tempDir(t), 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const model = await ensureDemoModel();
  const plan = swarm(['plan', '--agents', '100000', '--model', model, '--engine', 'batched', '--ram', String(machineRam()), '--cpus', String(os.availableParallelism()), '--reserve', '2G', '--json']);
  t.equal(plan.code, 0, plan.stderr);
  const max = JSON.parse(plan.stdout).maxAgents as number;
  t.ok(max > 0 && max < 100_000);
  const up = swarm(['up', '--agents', '100000', '--detach', '--state-dir', state]);
  t.equal(up.code, 2, 'refused as a configuration error');
  t.match(up.stderr, new RegExp(`SWARM_ERR_CONFIG: --agents 100000: at most ${max} agents`));
  t.match(up.stderr, /--force/);
  t.notOk(fs.existsSync(path.join(state, 'hub.json')), 'nothing was started');

  // One agent whose context no machine holds: refused, and started with --force (the engine caps it to the model's).
  const big = ['up', '--agents', '1', '--driver-opt', 'ctx=2000000000', '--detach', '--state-dir', state];
  t.equal(swarm(big).code, 2);
  const forced = swarm([...big, '--force']);
  t.equal(forced.code, 0, forced.stderr);
});

t.test('swarm down returns once the batched engine has exited', async (t) => {
  const state = path.join(tempDir(t), 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '2', '--detach', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  const pids = enginePids(state).filter(alive);
  t.equal(pids.length, 1, 'one batched engine runs');
  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
  t.same(pids.filter(alive), [], 'the engine is gone when down returns');
});

t.test('swarm down stops the batched engine even when its pid file was damaged or removed', async (t) => {
  for (const damage of ['garbage', 'removed'] as const) {
    const state = path.join(tempDir(t), 'state');
    t.teardown(() => { swarm(['down', '--state-dir', state]); });
    const up = swarm(['up', '--agents', '2', '--detach', '--state-dir', state]);
    t.equal(up.code, 0, up.stderr);
    const pids = enginePids(state).filter(alive);
    t.equal(pids.length, 1, `${damage}: one batched engine runs`);
    const dir = path.join(state, 'engines');
    for (const n of fs.readdirSync(dir).filter((x) => x.endsWith('.pid'))) {
      if (damage === 'garbage') fs.writeFileSync(path.join(dir, n), 'garbage\n'); else fs.rmSync(path.join(dir, n));
    }
    const down = swarm(['down', '--state-dir', state, '--json']);
    t.equal(down.code, 0, down.stderr);
    t.same(pids.filter(alive), [], `${damage}: the engine is gone when down returns`);
  }
});
