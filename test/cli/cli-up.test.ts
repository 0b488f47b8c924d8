import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { api, hubFile, pidsMentioning, swarm, until, tempDir } from '../helpers/cli.js';

t.test('swarm up --agents 25 --detach answers 1,000 tasks, and swarm down leaves no process behind', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '25', '--driver', 'echo', '--detach', '--json', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  const summary = JSON.parse(up.stdout);
  t.equal(summary.agents, 25);
  t.ok(summary.ready_ms > 0);
  const status = JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout);
  t.equal(status.workers.length, 25, '25 workers connected');
  for (const w of status.workers) t.match(w, { id: String, state: String, role: String, driver: 'echo' }, '', { diagnostic: false });
  t.same(Object.keys(status.tasks).sort(), ['done', 'failed', 'leased', 'queued']);

  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, Array.from({ length: 1000 }, (_, i) => JSON.stringify({ id: `job-${i}`, prompt: `p${i}` })).join('\n') + '\n');
  const sub = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  t.equal(sub.code, 0, sub.stderr);
  const res = JSON.parse(sub.stdout);
  t.equal(res.complete, true);
  t.equal(res.tasks.length, 1000);
  t.equal(res.tasks.filter((x: { state: string }) => x.state === 'done').length, 1000, 'all 1,000 done');
  t.ok(res.tasks.every((x: { id: string; text: string }) => x.text === `echo: p${x.id.slice(4)}`), 'every answer matches its task');
  const s2 = JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout);
  t.same(s2.tasks, { queued: 0, leased: 0, done: 1000, failed: 0 });
  t.equal(s2.metrics.duplicate_results, 0, 'no duplicate results');

  const hubPid = hubFile(state)!.pid;
  const down = swarm(['down', '--state-dir', state, '--json']);
  t.equal(down.code, 0, down.stderr);
  t.equal(JSON.parse(down.stdout).remaining, 0);
  t.ok(await until(() => pidsMentioning(state).length === 0, 30_000), 'no process of the swarm is left');
  t.same(pidsMentioning(state), []);
  t.notOk(fs.existsSync(path.join(state, 'hub.json')), 'hub.json removed');
  t.ok(hubPid > 0);
});

t.test('swarm status and submit without a swarm fail with exit code 3 and SWARM_ERR_NO_SWARM', async (t) => {
  const dir = tempDir(t);
  const s = swarm(['status', '--state-dir', dir]);
  t.equal(s.code, 3);
  t.match(s.stderr, /SWARM_ERR_NO_SWARM/);
  const j = swarm(['submit', 'x', '--json', '--state-dir', dir]);
  t.equal(j.code, 3);
  t.equal(JSON.parse(j.stdout).error.code, 'SWARM_ERR_NO_SWARM');
});

t.test('swarm up refuses a second swarm on the same state dir', async (t) => {
  const state = tempDir(t);
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', state]).code, 0);
  const again = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', state]);
  t.equal(again.code, 6);
  t.match(again.stderr, /SWARM_ERR_ALREADY_RUNNING/);
  // bad input does not hurt the running swarm
  const bad = await api<{ code: string }>(state, 'POST', '/tasks', { prompt: 5 });
  t.equal(bad.code, 'SWARM_ERR_BAD_PAYLOAD');
  const ok = swarm(['submit', 'still here', '--wait', '--state-dir', state]);
  t.equal(ok.code, 0, ok.stderr);
  t.equal(ok.stdout.trim(), 'echo: still here');
});

t.test('swarm up on a taken port fails with the hub\'s own error and exit code, and leaves nothing running', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())));
  const port = (blocker.address() as net.AddressInfo).port;
  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--json', '--port', String(port), '--state-dir', state]);
  t.equal(up.code, 2, 'exit 2: a configuration error');
  const err = JSON.parse(up.stdout).error;
  t.equal(err.code, 'SWARM_ERR_CONFIG');
  t.match(err.msg, /in use/);
  t.ok(await until(() => pidsMentioning(state).length === 0, 30_000), 'no process of the swarm is left');
});
