import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { swarm, tempDir } from '../helpers/cli.js';

type Passport = { models: { role: string; path: string; sha256?: string; error?: string }[]; drivers: { driver: string }[]; driver_options?: Record<string, string> };

t.test('swarm run: the engine asked for or a clear refusal; the passport names driver, options and model; model paths from the CLI resolve against the cwd', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  fs.mkdirSync(path.join(dir, 'exp'));
  fs.mkdirSync(path.join(dir, 'models'));
  fs.writeFileSync(path.join(dir, 'models', 'base.gguf'), 'not a real model: the simulated driver never reads it');
  fs.writeFileSync(path.join(dir, 'exp', 'star.yaml'), 'name: e\ntopology: star\ninputs: {items: ["What is 2+3?"]}\n');
  const up = swarm(['up', '--driver', 'simulated', '--driver-opt', 'p=0.6', '--model', 'models/base.gguf', '--agents', '1', '--detach', '--state-dir', state], { cwd: dir });
  t.equal(up.code, 0, up.stderr);
  const run = (args: string[], json = true) => swarm(['run', 'exp/star.yaml', '--state-dir', state, ...(json ? ['--json'] : []), ...args], { cwd: dir, timeoutMs: 120_000 });
  const passport = (stdout: string) => JSON.parse(fs.readFileSync(path.join((JSON.parse(stdout) as { dir: string }).dir, 'passport.json'), 'utf8')) as Passport;

  const plain = run([]);
  t.equal(plain.code, 0, plain.stderr);
  const p = passport(plain.stdout);
  t.same(p.driver_options, { p: '0.6' }, 'the driver options the workers run with');
  t.same(p.drivers.map((d) => d.driver), ['simulated']);
  t.equal(p.models[0]?.path, path.join(dir, 'models', 'base.gguf'), 'the model swarm up was started with, not "not recorded"');
  t.ok(p.models[0]?.sha256, 'with its sha256');

  const other = run(['--driver', 'simulated', '--driver-opt', 'p=0.95'], false);
  t.equal(other.code, 2, 'p=0.95 asked of a p=0.6 swarm is refused');
  t.match(other.stderr, /--driver-opt p=0\.95 \(it runs p=0\.6\).*swarm down --state-dir/);
  t.match(run(['--driver', 'echo'], false).stderr, /driver echo \(it runs simulated\)/);
  t.match(run(['--model', 'models/base.gguf']).code, 0, 'the same model, given relative to the cwd, is the same engine');

  const missing = run(['--set', 'roles.agent.model=models/x.gguf'], false);
  t.equal(missing.code, 2);
  t.match(missing.stderr, new RegExp(`model ${path.join(dir, 'models', 'x.gguf').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(roles\\.agent\\.model\\) does not exist`),
    'resolved against the cwd (not the experiment\'s folder), and an error');
  fs.writeFileSync(path.join(dir, 'models', 'x.gguf'), 'another');
  const set = run(['--set', 'roles.agent.model=models/x.gguf']);
  t.equal(set.code, 0, set.stderr);
  t.equal(passport(set.stdout).models[0]?.path, path.join(dir, 'models', 'x.gguf'));
});
