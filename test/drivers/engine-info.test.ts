import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { describeEngines, passportFields, runningEngines, writeEngineInfo, type EngineInfo } from '../../drivers/batched/engine-info.js';

const info = (pid: number, model: string, fa: 'on' | 'off'): EngineInfo => ({
  pid, model, sequences: 8, ctx: 512, kv: 'unified', binding: 'self-built', loop: 'direct', threads: 'auto, 2 at start',
  flash_attn: fa, flash_attn_why: fa === 'off' ? 'auto: head size 48 is not a multiple of the CPU\'s 64-lane f16 loops' : 'flash_attn=on',
});

t.test('status and the passport see what running engines resolved, not engines that are gone', async (t) => {
  const dir = t.testdir({ engines: { 'damaged.json': '{"pid":' } });
  // A pid that has surely exited: a child that ran and was reaped.
  const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
  writeEngineInfo(path.join(dir, 'engines', 'a.json'), info(process.pid, '/m/synth-15M.gguf', 'off'));
  writeEngineInfo(path.join(dir, 'engines', 'b.json'), info(dead, '/m/old.gguf', 'on'));
  const live = runningEngines(dir);
  t.same(live.map((e) => e.model), ['/m/synth-15M.gguf'], 'only the live engine; the damaged file is skipped');
  t.same(describeEngines(live), ["8 sequences of 512 tokens, KV unified, flash attention off (auto: head size 48 is not a multiple of the CPU's 64-lane f16 loops)"]);
  t.same(passportFields(live), {
    flash_attention: "off (auto: head size 48 is not a multiple of the CPU's 64-lane f16 loops)",
    batched_engine: "8 sequences of 512 tokens, KV unified (self-built binding), own decode loop, threads auto, 2 at start",
  });
  const why = { ...info(process.pid, '/m/synth-110M.gguf', 'on'), kv: 'per sequence' as const, kv_why: 'auto: a unified cache would cost more' };
  t.match(passportFields([why]).batched_engine, /KV per sequence \(self-built binding; auto: a unified cache would cost more\)/, 'the passport says why the KV layout is what it is');
  t.same(runningEngines(path.join(dir, 'none')), [], 'no engines dir: none');
  t.equal(fs.statSync(path.join(dir, 'engines', 'a.json')).mode & 0o777, 0o600, 'owner-only, like the rest of the engine files');
});

t.test('several engines (a model per role) are told apart by model', async (t) => {
  const two = [info(1, '/m/a.gguf', 'off'), info(2, '/m/b.gguf', 'on')];
  t.match(describeEngines(two), [/^a\.gguf: .*flash attention off/, /^b\.gguf: .*flash attention on \(flash_attn=on\)/]);
  t.same(Object.keys(passportFields(two)).sort(), ['batched_engine a.gguf', 'batched_engine b.gguf', 'flash_attention a.gguf', 'flash_attention b.gguf']);
});
