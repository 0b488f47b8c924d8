// deploy/healthcheck.mjs (the Containerfile's HEALTHCHECK, Podman's probes) dials what the hub
// serves: plain HTTP on loopback, HTTPS on the host's address in the --hosts layout; a worker's
// failover status file is its heartbeat.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, swarm, tempDir, until } from '../helpers/cli.js';
import { killGroup, startHub } from '../helpers/failover.js';
import { makeHosts, requireNamespaces, type Host } from '../helpers/netns.js';

const CHECK = path.join(ROOT, 'deploy/healthcheck.mjs');
const check = (args: string[]) => spawnSync(process.execPath, [CHECK, ...args], { encoding: 'utf8', timeout: 20_000 });

t.test('hub on loopback: healthy while it runs, not once it is gone', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const hub = await startHub(state);
  t.teardown(() => killGroup(hub));
  t.equal(check(['hub', state]).status, 0, 'healthy');
  killGroup(hub);
  await until(() => hub.child.exitCode !== null || hub.child.signalCode !== null, 10_000);
  const gone = check(['hub', state]);
  t.equal(gone.status, 1, 'unhealthy once the hub is gone');
  t.match(gone.stderr, /healthcheck: http:\/\/127\.0\.0\.1:\d+\/healthz/, `says what it dialled: ${gone.stderr.trim()}`);
});

t.test('hub in the --hosts layout: HTTPS on the host address', async (t) => {
  if (!requireNamespaces(t)) return;
  const dir = tempDir(t);
  const bed = makeHosts(t, ['a']);
  const [a] = bed.hosts as [Host];
  const certs = path.join(dir, 'certs');
  t.equal(swarm(['certs', '--dir', certs, '--host', `hub=${a.addr}`]).code, 0);
  const state = path.join(dir, 'state');
  // As the rendered hub pod runs it (deploy/render/podman-hosts.ts).
  a.swarmBg(['hub', '--host', a.addr, '--control-host', a.addr, '--tls-cert', path.join(certs, 'hub.crt'), '--tls-key', path.join(certs, 'hub.key'),
    '--tls-ca', path.join(certs, 'ca.crt'), '--state-dir', state, '--log-file', path.join(dir, 'hub.log')], { env: { SWARM_TOKEN_FILE: path.join(certs, 'token') } });
  t.ok(await until(() => fs.existsSync(path.join(state, 'hub.json')), 20_000), 'the hub is up');
  const hubJson = JSON.parse(fs.readFileSync(path.join(state, 'hub.json'), 'utf8')) as { control: { host: string; tls?: boolean } };
  t.same([hubJson.control.host, hubJson.control.tls], [a.addr, true], 'its control API: HTTPS on the host address');
  const r = a.exec([process.execPath, CHECK, 'hub', state]);
  t.equal(r.code, 0, `healthy (${r.stderr.trim()})`);
});

t.test('worker: a fresh failover status file is healthy, a stale one is not', async (t) => {
  const dir = tempDir(t);
  const status = path.join(dir, 'w', 'failover');
  fs.mkdirSync(status, { recursive: true });
  const file = path.join(status, '1.json');
  fs.writeFileSync(file, '{}');
  t.equal(check(['worker', path.join(dir, 'w')]).status, 0, 'fresh: healthy');
  const old = new Date(Date.now() - 60_000);
  fs.utimesSync(file, old, old);
  t.equal(check(['worker', path.join(dir, 'w')]).status, 1, 'stale (a hung worker): unhealthy');
  // "Alive" is a swarm process on the machine (in a container: the worker itself). On a test host that
  // is whatever other test runs beside this one, if any: one is started here so the case does not
  // hang on its neighbours.
  const swarmProc = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)', path.join(dir, 'cli', 'main.js')], { stdio: 'ignore' });
  t.teardown(() => { swarmProc.kill('SIGKILL'); });
  await until(() => { try { return fs.readFileSync(`/proc/${swarmProc.pid}/cmdline`, 'utf8').includes('/cli/main.js'); } catch { return false; } }, 10_000, 20);
  t.equal(check(['worker', path.join(dir, 'none')]).status, 0, 'no failover (no status file): the process being alive is enough');
});
