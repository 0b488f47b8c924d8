import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { pidsMentioning, swarm, until, tempDir } from '../helpers/cli.js';

t.test('SWARM_NODE_ARGS reaches the hub and every worker: --cpu-prof leaves one profile per process after down', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const prof = path.join(dir, 'prof');
  const env = { SWARM_NODE_ARGS: ` --cpu-prof  --cpu-prof-dir=${prof} ` };
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '-n', '2', '--procs', '2', '--driver', 'echo', '--no-failover', '--detach', '--json', '--state-dir', state], { env });
  t.equal(up.code, 0, up.stderr);
  const sub = swarm(['submit', 'hello', '--wait', '--state-dir', state]);
  t.equal(sub.stdout, 'echo: hello\n', sub.stderr);
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.ok(await until(() => pidsMentioning(state).length === 0, 30_000), 'the swarm stopped');
  const profiles = () => (fs.existsSync(prof) ? fs.readdirSync(prof).filter((x) => x.endsWith('.cpuprofile')) : []);
  // CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile: thread 0 is a process's main thread (a logger's thread writes its own).
  const mains = () => new Set(profiles().filter((f) => f.split('.')[4] === '0').map((f) => f.split('.')[3]));
  await until(() => mains().size >= 3, 10_000);
  t.equal(mains().size, 3, 'hub and two workers each wrote a main-thread profile');
  const files = profiles();
  for (const f of files) t.ok(Array.isArray(JSON.parse(fs.readFileSync(path.join(prof, f), 'utf8')).nodes), `${f} is a CPU profile`);
});

t.test('SWARM_HUB_NODE_ARGS reaches the hub only: one main-thread profile, the hub\'s', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const prof = path.join(dir, 'prof');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '-n', '2', '--procs', '2', '--driver', 'echo', '--no-failover', '--detach', '--json', '--state-dir', state], { env: { SWARM_HUB_NODE_ARGS: `--cpu-prof --cpu-prof-dir=${prof}` } });
  t.equal(up.code, 0, up.stderr);
  const hubPid = (JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { pid: number }).pid;
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.ok(await until(() => pidsMentioning(state).length === 0, 30_000), 'the swarm stopped');
  const mains = () => (fs.existsSync(prof) ? fs.readdirSync(prof).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[4] === '0').map((f) => Number(f.split('.')[3])) : []);
  await until(() => mains().length >= 1, 10_000);
  t.same(mains(), [hubPid], 'the hub wrote one; its two workers none');
});

t.test('a flag Node refuses stops `swarm up` with Node\'s own words', async (t) => {
  const state = path.join(tempDir(t), 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '-n', '1', '--driver', 'echo', '--detach', '--state-dir', state], { env: { SWARM_NODE_ARGS: '--no-such-flag' } });
  t.not(up.code, 0);
  t.match(up.stderr, /hub exited/);
  t.match(up.stderr, /bad option: --no-such-flag/);
});
