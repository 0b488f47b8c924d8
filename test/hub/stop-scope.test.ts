// A hub's SIGTERM (a rollout, `systemctl restart`) stops what it supervises on its own host and
// nothing else: a worker started apart keeps running and rejoins the next hub. `swarm down` still
// stops everything, that worker included.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { alive, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { freePorts, killGroup, startHub } from '../helpers/failover.js';

const joined = (state: string, id: string): boolean => {
  const r = swarm(['status', '--state-dir', state, '--json']);
  return r.code === 0 && (JSON.parse(r.stdout) as { workers: { id: string }[] }).workers.some((w) => w.id === id);
};

t.test('hub SIGTERM stops its supervised worker, not one started apart, which rejoins the next hub; swarm down stops both', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  // A fixed port, as a deployment gives its hub: the next hub is found where the last one was.
  const [port] = await freePorts(1);
  const hub = await startHub(state, ['--port', String(port), '--supervise', '1', '--driver', 'echo']);
  t.teardown(() => killGroup(hub));
  const hubJson = JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { port: number; token: string };
  // Started apart, by address and token, as on another host: no pid file, not the hub's child.
  const apart = swarmBg(['worker', '--hub', `127.0.0.1:${hubJson.port}`, '--id', 'apart', '--driver', 'echo', '--state-dir', path.join(dir, 'apart'),
    '--log-file', path.join(dir, 'apart.log')], { env: { SWARM_TOKEN: hubJson.token } });
  t.teardown(() => killGroup(apart));
  t.ok(await until(() => joined(state, 'w-1') && joined(state, 'apart'), 30_000, 200), 'the supervised worker and the one started apart joined');
  const supervisedPid = (JSON.parse(fs.readFileSync(path.join(state, 'pids', 'w-1.pid'), 'utf8')) as { pid: number }).pid;

  process.kill(hub.child.pid!, 'SIGTERM');
  t.ok(await until(() => hub.child.exitCode !== null, 20_000, 50), 'the hub exits on SIGTERM');
  t.ok(await until(() => !alive(supervisedPid), 10_000, 50), 'its supervised worker process is stopped');
  t.equal(apart.child.exitCode, null, 'the worker started apart is still running');
  t.notMatch(fs.readFileSync(path.join(dir, 'apart.log'), 'utf8'), /KILL: shutdown/, 'it was not sent KILL');

  const next = await startHub(state, ['--port', String(port), '--supervise', '1', '--driver', 'echo']);
  t.teardown(() => killGroup(next));
  t.ok(await until(() => joined(state, 'apart'), 30_000, 200), 'the worker started apart rejoins the next hub') || t.comment(fs.readFileSync(path.join(dir, 'apart.log'), 'utf8').slice(-3000));
  t.equal(apart.child.exitCode, null, 'having run throughout');

  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
  t.ok(await until(() => apart.child.exitCode !== null, 15_000, 50), 'swarm down stops the worker started apart too (the hub KILLs every worker)');
  t.equal(apart.child.exitCode, 0, 'which exits cleanly');
});
