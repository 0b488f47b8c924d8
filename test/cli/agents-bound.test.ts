import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, swarm, tempDir } from '../helpers/cli.js';
import { agentBound } from '../../cli/agent-bound.js';

/**
 * Settings far past what a host or the protocol holds are refused before anything starts: a million
 * echo agents took every ephemeral port (worker processes and then the hub died on `listen
 * EADDRINUSE`, and one worker outlived `swarm down`); `--slots` past the HANDSHAKE's bound left every
 * worker refused and `up` waiting for its ready timeout.
 */

t.test('the agent bound is the smaller of open files and local ports', async (t) => {
  t.same(agentBound(false, { files: 20_000, ports: 28_232 })?.max, 16_720, 'open files decide without failover (the hub\'s worker-port cap: 20,000 less 2,000 kept and 1,280 for the control API)');
  t.same(agentBound(true, { files: 20_000, ports: 28_232 })?.max, 9_410, 'ports decide with failover (3 an agent)');
  t.match(agentBound(true, { files: 1024, ports: 28_232 })?.why, /ulimit -n/);
  t.equal(agentBound(true, {}), undefined, 'no bound where neither is known');
});

t.test('--agents past the open files the hub may hold: a usage error naming the limit, nothing started', async (t) => {
  const state = path.join(tempDir(t), 'state');
  // A lowered soft limit stands for a host's: 512 files hold 192 agents, 64 control connections and 256 of the hub's own files.
  const r = spawnSync('sh', ['-c', `ulimit -n 512 && exec "${process.execPath}" "${CLI}" up --state-dir "${state}" --driver echo --agents 1000 --no-failover -d --ready-timeout 5000`], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 2, `exit 2 (${r.stderr.trim().split('\n')[0]})`);
  t.match(r.stderr, /SWARM_ERR_CONFIG: --agents 1000: this host holds at most 192 agents: .*ulimit -n.*--force/);
  t.notOk(fs.existsSync(path.join(state, 'hub.json')), 'no hub was started');
  // With a model both bounds apply (memory by the plan, files here): the lower one is named.
  const m = spawnSync('sh', ['-c', `ulimit -n 512 && exec "${process.execPath}" "${CLI}" up --state-dir "${state}" --agents 100000 -d --ready-timeout 5000`], { encoding: 'utf8', timeout: 60_000 });
  t.equal(m.status, 2, `exit 2 (${m.stderr.trim().split('\n').pop()})`);
  t.match(m.stderr, /--agents 100000: this host holds at most 192 agents: .*ulimit -n/, 'the host bound, lower than the plan, is the one named');
  t.notOk(fs.existsSync(path.join(state, 'hub.json')), 'no hub was started');
});

t.test('--slots, --queue and --max-attempts past their protocol bounds are usage errors, not a wait for the ready timeout', async (t) => {
  const state = path.join(tempDir(t), 'state');
  const up = swarm(['up', '--state-dir', state, '--driver', 'echo', '--slots', '100000', '-d', '--ready-timeout', '5000']);
  t.equal(up.code, 2, up.stderr);
  t.match(up.stderr, /--slots must be at most 1024/);
  const w = swarm(['worker', '--state-dir', state, '--driver', 'echo', '--queue', '640']);
  t.equal(w.code, 2, w.stderr);
  t.match(w.stderr, /--queue must be at most 64/);
  // The same bound as a task's own max_attempts: past it a failing task is retried all but forever.
  const a = swarm(['up', '--state-dir', state, '--driver', 'echo', '--max-attempts', '1000000000', '-d', '--ready-timeout', '5000']);
  t.equal(a.code, 2, a.stderr);
  t.match(a.stderr, /--max-attempts must be at most 100/);
});
