import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CLI, pidsMentioning, sleep, tempDir, until } from '../helpers/cli.js';

/**
 * A swarm stopped while `swarm up -d` waits for it to be ready (a `swarm down` run meanwhile, a
 * SIGTERM to the hub): up said SWARM_ERR_INTERNAL "hub exited (code 0)", a bug to report. It says the
 * swarm was stopped (SWARM_ERR_SHUTDOWN).
 */
t.test('swarm up -d whose hub is stopped before it is ready says it was stopped, not a bug', async (t) => {
  const state = path.join(tempDir(t), 'state');
  const up = spawn(process.execPath, [CLI, 'up', '-d', '--state-dir', state, '--driver', 'echo', '--agents', '2', '--ready-timeout', '60000'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  up.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  up.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  let code: number | null | undefined;
  up.on('exit', (c) => { code = c; });
  t.teardown(() => { for (const p of pidsMentioning(state)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } });
  // Held still as soon as it is there, so that it reports no worker ready before the stop.
  const isHub = (p: number) => { try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('\0hub\0'); } catch { return false; } };
  let hub = 0;
  t.ok(await until(() => { hub = pidsMentioning(state).find(isHub) ?? 0; if (hub) process.kill(hub, 'SIGSTOP'); return hub > 0; }, 30_000, 2), 'the hub started');
  await sleep(200);
  process.kill(hub, 'SIGTERM');
  process.kill(hub, 'SIGCONT');
  t.ok(await until(() => code !== undefined, 60_000), 'up returns');
  t.not(code, 0, `up does not say ready (${out.trim()})`);
  t.match(out, /SWARM_ERR_SHUTDOWN: the swarm was stopped while it started/, 'says it was stopped');
  t.notMatch(out, /SWARM_ERR_INTERNAL|this is a bug/, 'not as a bug');
  t.ok(await until(() => pidsMentioning(state).length === 0, 20_000), 'nothing of it runs');
});
