import t from 'tap';
import path from 'node:path';
import fs from 'node:fs';
import { ControlServer, parseRolePlan, type Hub } from '../../hub/index.js';
import { quiet, startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { api, swarm, tempDir, until } from '../helpers/cli.js';
import { fixtureFile } from '../helpers/paths.js';

/** Confirmed roles by count, once no assignment is pending (bounded). */
async function settled(hub: Hub, ms = 10_000): Promise<Record<string, number>> {
  await until(() => [...hub.registry.all()].every((w) => !w.pendingRole), ms);
  const out: Record<string, number> = {};
  for (const w of hub.registry.all()) out[w.role] = (out[w.role] ?? 0) + 1;
  return out;
}

t.test('parseRolePlan reads thinker=2,worker=3 and refuses nonsense', async (t) => {
  t.same(parseRolePlan('thinker=2, worker=3'), { thinker: 2, worker: 3 });
  for (const bad of ['thinker', 'thinker=-1', 'thinker=x', '__proto__=1', 'a b=1']) t.throws(() => parseRolePlan(bad), { code: 'SWARM_ERR_CONFIG' }, bad);
});

t.test('a role plan is handed out with ASSIGN_ROLE; workers ACK and take it; dispatch by role uses it; a reconnect keeps it', async (t) => {
  const { hub, addr, stop } = await startHub({ roles: { thinker: 2, worker: 3 }, heartbeatMs: 200 });
  const pool = startPool(addr, 5);
  t.teardown(async () => { await pool.stop(); await stop(); });
  t.ok(await waitWorkers(hub, 5));
  t.same(await settled(hub), { thinker: 2, worker: 3 }, 'two thinkers, three workers');
  for (const a of pool.pool.agents) t.equal(a.role, hub.registry.get(a.client.conn!.name)?.role, `${a.client.conn!.name} took its role`);
  const specs = [
    ...Array.from({ length: 20 }, (_, i) => ({ id: `th-${i}`, prompt: `think ${i}`, role: 'thinker' })),
    ...Array.from({ length: 20 }, (_, i) => ({ id: `wk-${i}`, prompt: `work ${i}`, role: 'worker' })),
  ];
  await hub.submit(specs);
  t.ok(await waitTasks(hub, 40));
  const roleOf = (id: string) => hub.registry.get(id)?.role;
  for (const s of specs) {
    const rec = hub.store.queue.get(s.id)!;
    t.equal(rec.state, 'done', '', { diagnostic: false });
    t.equal(roleOf(rec.result!.worker!), s.role, `${s.id} ran on a ${s.role}`, { diagnostic: false });
  }
  // A reconnect: the HANDSHAKE carries the role taken, so nothing is handed out again.
  const agent = pool.pool.agents[0]!;
  const id = agent.client.conn!.name;
  const before = hub.registry.get(id)!;
  agent.client.conn!.destroy('test: reconnect');
  t.ok(await until(() => { const w = hub.registry.get(id); return w !== undefined && w !== before; }), 'reconnected');
  t.equal(hub.registry.get(id)!.role, before.role, 'same role after the reconnect');
  t.same(await settled(hub), { thinker: 2, worker: 3 }, 'the plan still holds');
});

t.test('the control API changes the plan and assigns one worker; status shows roles; a refusal is respected', async (t) => {
  const { hub, addr, stop } = await startHub({ heartbeatMs: 200 });
  const control = new ControlServer(hub, { host: '127.0.0.1', port: 0 }, quiet);
  const c = await control.start();
  const pool = startPool(addr, 4);
  const own = startPool(addr, 1, { prefix: 'coder', role: 'coder' });
  const refuser = await RawWorker.connect(addr);
  t.teardown(async () => { refuser.destroy(); await pool.stop(); await own.stop(); await control.stop(); await stop(); });
  await refuser.handshake({ worker_id: 'a-refuser' }); // sorts first: the plan asks it before the others
  t.ok(await waitWorkers(hub, 6));
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://${c.host}:${c.port}${p}`, { method, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any };
  };
  const set = await call('POST', '/roles', { roles: { thinker: 2, coder: 1 } });
  t.equal(set.status, 200);
  t.same(set.body.plan, { thinker: 2, coder: 1 });
  const ask = await refuser.next((f) => f.type === 'ASSIGN_ROLE');
  t.equal(ask?.payload.role, 'thinker', 'the raw worker is asked');
  refuser.send('ACK', { ok: false }, { re: ask.id });
  t.same(await settled(hub), { thinker: 2, coder: 1, '': 3 }, 'the worker that joined as coder counts; the refusal is skipped; two echo workers think');
  t.equal(hub.registry.get('a-refuser')!.role, '', 'the refuser keeps no role');
  // Shrink and change: thinker=1, critic=1. One thinker is freed and becomes the critic.
  await call('POST', '/roles', { thinker: 1, critic: 1 });
  t.same(await settled(hub), { thinker: 1, critic: 1, coder: 1, '': 3 }, 'the plan moved only roles it gave');
  // One worker, by the operator.
  const one = await call('POST', '/workers/w-4/role', { role: 'judge', spec_ref: 'roles/judge.md' });
  t.equal(one.status, 202);
  await settled(hub);
  t.equal(hub.registry.get('w-4')!.role, 'judge');
  const status = await call('GET', '/status');
  t.equal(status.body.workers.find((w: { id: string }) => w.id === 'w-4').role, 'judge', 'status shows the role');
  const roles = await call('GET', '/roles');
  t.equal(roles.body.workers.length, 6);
  // Bad input gets a code, never a crash.
  t.equal((await call('POST', '/roles', { roles: { thinker: -1 } })).body.code, 'SWARM_ERR_CONFIG');
  t.equal((await call('POST', '/roles', { roles: [1] })).body.code, 'SWARM_ERR_CONFIG');
  t.equal((await call('POST', '/workers/nobody/role', { role: 'x' })).body.code, 'SWARM_ERR_CONFIG');
  t.equal((await call('POST', '/workers/w-1/role', { role: 5 })).body.code, 'SWARM_ERR_BAD_PAYLOAD');
  const raw = await fetch(`http://${c.host}:${c.port}/roles`, { method: 'POST', body: '{not json' });
  t.equal(((await raw.json()) as { code: string }).code, 'SWARM_ERR_BAD_JSON');
  t.ok(hub.registry.size === 6, 'all still connected');
});

t.test('swarm up --roles thinker=2,worker=3: status shows the roles and tasks run on their role', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = swarm(['up', '--agents', '5', '--driver', 'echo', '--roles', 'thinker=2,worker=3', '--detach', '--json', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  type W = { id: string; role: string; role_pending?: string };
  let workers: W[] = [];
  t.ok(await until(() => {
    workers = (JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout) as { workers: W[] }).workers;
    return workers.length === 5 && workers.every((w) => w.role && !w.role_pending);
  }, 30_000), 'every worker took a role');
  t.equal(workers.filter((w) => w.role === 'thinker').length, 2);
  t.equal(workers.filter((w) => w.role === 'worker').length, 3);
  const text = swarm(['status', '--state-dir', state]).stdout;
  t.match(text, /thinker/, 'the text status shows roles too');
  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, Array.from({ length: 30 }, (_, i) => JSON.stringify({ id: `r-${i}`, prompt: `p${i}`, role: i % 2 ? 'thinker' : 'worker' })).join('\n') + '\n');
  const sub = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  t.equal(sub.code, 0, sub.stderr);
  const res = JSON.parse(sub.stdout) as { tasks: { id: string; state: string; worker: string }[] };
  const roleOf = new Map(workers.map((w) => [w.id, w.role]));
  t.equal(res.tasks.filter((x) => x.state === 'done').length, 30, 'all 30 done');
  for (const x of res.tasks) t.equal(roleOf.get(x.worker), Number(x.id.slice(2)) % 2 ? 'thinker' : 'worker', `${x.id} ran on its role`, { diagnostic: false });
  const view = await api<{ plan: Record<string, number> }>(state, 'GET', '/roles');
  t.same(view.plan, { thinker: 2, worker: 3 });
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
});

t.test('the Python worker written from PROTOCOL.md takes a planned role and runs that role\'s tasks', async (t) => {
  const { spawn } = await import('node:child_process');
  const { hub, addr, stop } = await startHub({ roles: { reviewer: 1 } });
  const py = spawn('python3', [fixtureFile('py-worker.py'), '--host', addr.host, '--port', String(addr.port), '--id', 'py-role'], { stdio: 'ignore' });
  t.teardown(async () => { if (py.exitCode === null) py.kill('SIGKILL'); await stop(); });
  t.ok(await waitWorkers(hub, 1));
  t.same(await settled(hub), { reviewer: 1 }, 'role acknowledged');
  await hub.submit([{ id: 'rv-1', prompt: 'review this', role: 'reviewer' }]);
  t.ok(await waitTasks(hub, 1));
  t.equal(hub.store.queue.get('rv-1')?.result?.text, 'REVIEW THIS');
});
