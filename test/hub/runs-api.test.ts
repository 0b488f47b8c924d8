import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ControlServer } from '../../hub/index.js';
import { quiet, startHub, startPool, waitWorkers } from '../helpers/inproc.js';

async function http<T>(c: { host: string; port: number }, method: string, p: string, body?: unknown): Promise<{ status: number; body: T }> {
  const r = await fetch(`http://${c.host}:${c.port}${p}`, { method, body: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, body: (await r.json()) as T };
}

interface View { run: string; state: string; progress?: { done: number }; outcome?: { verdict: string; output: string } }

t.test('control API: POST /runs starts a run, GET /runs/:id reports it, and a restarted hub resumes it', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-runs-api-'));
  let h = await startHub({ stateDir: dir });
  let control = new ControlServer(h.hub, { host: '127.0.0.1', port: 0 }, quiet);
  let c = await control.start();
  let p = startPool(h.addr, 2, { options: { latency_ms: '25' } });
  // One teardown, in order: the current pool, control server and hub stop before their directory
  // goes (removing it first raced with a hub still writing the run's files: ENOTEMPTY).
  t.teardown(async () => { await p.stop(); await control.stop(); await h.stop(); fs.rmSync(dir, { recursive: true, force: true }); });
  t.ok(await waitWorkers(h.hub, 2));

  const bad = await http<{ code: string; msg: string }>(c, 'POST', '/runs', { experiment: 'topology: star\ninputs: {items: [a]}\nlimitz: {}\n' });
  t.equal(bad.status, 400);
  t.equal(bad.body.code, 'SWARM_ERR_CONFIG');
  t.match(bad.body.msg, /experiment:3:1: limitz: unknown field/);

  const items = Array.from({ length: 30 }, (_, i) => `item ${i}`);
  const started = await http<{ run: string }>(c, 'POST', '/runs', { experiment: { topology: 'star', inputs: { items } } });
  t.equal(started.status, 202);
  const missing = await http<{ code: string }>(c, 'GET', '/runs/no-such-run');
  t.equal(missing.status, 404);
  t.equal(missing.body.code, 'SWARM_ERR_UNKNOWN_RUN', 'an unknown run id has its own code');
  const run = started.body.run;
  // The run's progress follows the journal; poll it (bounded) rather than the queue.
  let mid = await http<View>(c, 'GET', `/runs/${run}`);
  for (let i = 0; i < 500 && (mid.body.progress?.done ?? 0) < 5; i++) {
    await new Promise((r) => setTimeout(r, 10));
    mid = await http<View>(c, 'GET', `/runs/${run}`);
  }
  t.equal(mid.body.state, 'running');
  t.ok(mid.body.progress!.done >= 5);
  await p.stop();
  await control.stop();
  await h.stop();

  h = await startHub({ stateDir: dir });
  control = new ControlServer(h.hub, { host: '127.0.0.1', port: 0 }, quiet);
  c = await control.start();
  p = startPool(h.addr, 2);
  let v: View | undefined;
  for (let i = 0; i < 200 && v?.state !== 'done'; i++) v = (await http<View>(c, 'POST', `/runs/${run}/wait`, { timeout_ms: 200 })).body;
  t.equal(v?.state, 'done');
  t.equal(v?.outcome?.verdict, 'done');
  t.equal(v?.outcome?.output.split('\n\n').length, 30);
  const list = await http<{ runs: View[] }>(c, 'GET', '/runs');
  t.same(list.body.runs.map((r) => r.run), [run]);
  t.equal((await http<{ code: string }>(c, 'GET', '/runs/nope')).status, 404);
});
