import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { groupIds, workerProcesses } from '../../cli/procs.js';
import { workerCredential } from '../../protocol/auth.js';
import { alive, api, hubFile, journal, pidsMentioning, swarm, swarmBg, until, tempDir } from '../helpers/cli.js';

t.test('workerProcesses: a process per agent for drivers that hold a model, cores less one for thin ones', async (t) => {
  t.equal(workerProcesses(25, 'embedded', 'auto', 2), 25, 'embedded: a process per agent');
  t.equal(workerProcesses(25, 'llama-server', 'auto', 4), 25, 'its own llama-server each');
  t.equal(workerProcesses(25, 'echo', 'auto', 2), 1, 'two cores: one process');
  t.equal(workerProcesses(25, 'batched', 'auto', 4), 3, 'four cores: three');
  t.equal(workerProcesses(2, 'echo', 'auto', 16), 2, 'never more than the agents');
  t.equal(workerProcesses(25, 'echo', 'auto', 1), 1, 'at least one');
  t.equal(workerProcesses(25, 'embedded', 5, 2), 5, 'a number given is kept');
  t.equal(workerProcesses(3, 'echo', 10, 2), 3, 'capped by the agents');
  t.equal(workerProcesses(0, 'echo', 'auto', 2), 0);
  t.equal(workerProcesses(2000, 'echo', 1, 2), 2, 'at most 1,000 agents in a process, whatever --procs says');
  t.equal(workerProcesses(2500, 'batched', 'auto', 2), 3);
});

t.test('groupIds splits in order, as evenly as possible, losing and repeating none', async (t) => {
  const bad: string[] = [];
  for (let n = 1; n <= 12; n++) {
    for (let p = 1; p <= 14; p++) {
      const ids = Array.from({ length: n }, (_, i) => `w-${i + 1}`);
      const g = groupIds(ids, p);
      const sizes = g.map((x) => x.length);
      if (g.length !== Math.min(n, p) || g.flat().join() !== ids.join() || Math.max(...sizes) - Math.min(...sizes) > 1) bad.push(`${n} over ${p}: ${sizes.join('+')}`);
    }
  }
  t.same(bad, [], '168 splits checked');
  t.same(groupIds(['a', 'b', 'c', 'd', 'e'], 2), [['a', 'b', 'c'], ['d', 'e']]);
});

t.test('swarm up --procs 2: six agents in two processes; one killed -9 mid-batch loses and repeats nothing and comes back', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const up = swarm(['up', '--agents', '6', '--procs', '2', '--driver', 'echo', '--driver-opt', 'latency_ms=5', '--detach', '--json', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  t.equal(JSON.parse(up.stdout).worker_processes, 2);
  const pidOf = (id: string) => (JSON.parse(fs.readFileSync(path.join(state, 'pids', `${id}.pid`), 'utf8')) as { pid: number }).pid;
  const ids = Array.from({ length: 6 }, (_, i) => `w-${i + 1}`);
  const before = ids.map(pidOf);
  t.equal(new Set(before).size, 2, 'two processes');
  t.same(before.slice(0, 3).every((p) => p === before[0]) && before.slice(3).every((p) => p === before[3]), true, 'w-1..3 share one, w-4..6 the other');
  t.same(pidsMentioning(state).filter((p) => before.includes(p)).sort(), [...new Set(before)].sort(), 'the pid files name live processes');
  const shown = swarm(['status', '--state-dir', state]).stdout;
  t.match(shown, /workers +6 \(6 IDLE\) in 2 processes/, 'status says how many processes');
  t.match(shown, new RegExp(`w-4 .* ${before[3]} `), 'and which process each worker is in');

  // The process's environment holds its workers' own credentials, never the swarm token.
  const token = hubFile(state)!.token!;
  const env = fs.readFileSync(`/proc/${before[0]}/environ`, 'utf8').split('\0');
  t.notOk(env.some((e) => e.includes(token)), 'no swarm token in a worker process');
  const creds = JSON.parse(env.find((e) => e.startsWith('SWARM_CREDENTIALS='))!.slice('SWARM_CREDENTIALS='.length)) as Record<string, string>;
  t.same(creds, Object.fromEntries(ids.slice(0, 3).map((id) => [id, workerCredential(token, id)])), 'a credential for each of its workers');

  const n = 600;
  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `t-${i}`, prompt: `p ${i}` })).join('\n') + '\n');
  const sub = swarmBg(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  t.ok(await until(() => journal(state).filter((r) => r.t === 'result').length >= 40, 30_000), 'results flowing');
  process.kill(before[3]!, 'SIGKILL');
  const code = await new Promise<number | null>((r) => sub.child.once('exit', (c) => r(c)));
  t.equal(code, 0, 'submit --wait exits 0');
  if (code !== 0) t.comment(sub.output().slice(-2000));
  const out = JSON.parse(sub.output().trim().split('\n').pop()!) as { complete: boolean; tasks: { id: string; state: string; text: string }[] };
  t.equal(out.complete, true);
  t.equal(out.tasks.length, n);
  t.equal(out.tasks.filter((x) => x.state === 'done' && x.text === `echo: p ${x.id.slice(2)}`).length, n, 'every task done with its own answer');
  const results = journal(state).filter((r) => r.t === 'result').map((r) => r.id!);
  t.equal(new Set(results).size, n, 'lost 0');
  t.equal(results.length, n, 'duplicated 0');

  t.ok(await until(() => { try { const p = pidOf('w-4'); return p !== before[3] && alive(p) && ids.slice(3).every((id) => pidOf(id) === p); } catch { return false; } }, 30_000), 'the killed process respawned with its three workers');
  t.ok(await until(async () => (await api<{ workers: unknown[] }>(state, 'GET', '/status')).workers.length === 6, 30_000), 'all six joined again');
  t.equal(pidOf('w-1'), before[0], 'the other process was left alone');
});

t.test('a process of several workers: each id needs its own credential; bad SWARM_CREDENTIALS and --ids are refused', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const up = swarm(['up', '--agents', '1', '--driver', 'echo', '--no-failover', '--detach', '--state-dir', state]);
  t.equal(up.code, 0, 'up');
  const token = hubFile(state)!.token!;
  const h = hubFile(state)!;
  const hub = `127.0.0.1:${h.port}`;
  // x-2 is given x-1's credential: x-1 joins, x-2 is refused.
  const w = swarmBg(['worker', '--hub', hub, '--ids', 'x-1,x-2', '--driver', 'echo'], {
    env: { SWARM_TOKEN: '', SWARM_CREDENTIALS: JSON.stringify({ 'x-1': workerCredential(token, 'x-1'), 'x-2': workerCredential(token, 'x-1') }) },
  });
  t.teardown(() => { try { process.kill(-w.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await api<{ workers: { id: string }[] }>(state, 'GET', '/status')).workers.some((x) => x.id === 'x-1'), 20_000), 'x-1 joined with its credential');
  t.ok(await until(() => /SWARM_ERR_AUTH/.test(w.output()), 20_000), 'x-2 refused');
  const ws = (await api<{ workers: { id: string }[] }>(state, 'GET', '/status')).workers.map((x) => x.id);
  t.notOk(ws.includes('x-2'), 'x-2 never joined');

  const bad = swarm(['worker', '--hub', hub, '--ids', 'y-1,y-2', '--driver', 'echo'], { env: { SWARM_CREDENTIALS: '["no"]' }, timeoutMs: 20_000 });
  t.equal(bad.code, 2, 'a configuration error');
  t.match(bad.stderr, /SWARM_CREDENTIALS must be a JSON object/);
  const both = swarm(['worker', '--hub', hub, '--ids', 'y-1', '--id', 'y', '--driver', 'echo'], { timeoutMs: 20_000 });
  t.equal(both.code, 2);
  t.match(both.stderr, /--ids names every worker/);
  const twice = swarm(['worker', '--hub', hub, '--ids', 'y-1,y-1'], { timeoutMs: 20_000 });
  t.equal(twice.code, 2);
  t.match(twice.stderr, /an id given twice/);
  const zero = swarm(['up', '--procs', '0', '--state-dir', path.join(dir, 'other')]);
  t.equal(zero.code, 2);
  t.match(zero.stderr, /--procs must be auto or an integer >= 1/);
});

t.test('swarm up after a hub crash adopts its worker processes, mends a damaged pid file, and stops those of another layout', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const common = ['--agents', '6', '--driver', 'echo', '--no-failover', '--detach', '--json', '--state-dir', state];
  t.equal(swarm(['up', '--procs', '2', ...common]).code, 0);
  const pidFile = (id: string) => path.join(state, 'pids', `${id}.pid`);
  const pidOf = (id: string) => { try { return (JSON.parse(fs.readFileSync(pidFile(id), 'utf8')) as { pid: number }).pid; } catch { return undefined; } };
  const ids = Array.from({ length: 6 }, (_, i) => `w-${i + 1}`);
  const workers = () => new Set(ids.map(pidOf));
  const first = [...workers()];
  t.equal(first.length, 2);
  const crash = async () => {
    const hub = hubFile(state)!.pid;
    process.kill(hub, 'SIGKILL');
    t.ok(await until(() => !alive(hub), 10_000), 'hub killed');
  };

  await crash();
  fs.writeFileSync(pidFile('w-2'), '{"pid": 1, garbage');
  const again = swarm(['up', '--procs', '2', ...common]);
  t.equal(again.code, 0, again.stderr);
  t.same([...workers()].sort(), [...first].sort(), 'both processes adopted, the damaged file mended');
  t.ok(first.every((p) => alive(p!)));

  await crash();
  const three = swarm(['up', '--procs', '3', ...common]);
  t.equal(three.code, 0, three.stderr);
  t.ok(await until(() => first.every((p) => !alive(p!)), 10_000), 'the processes of the old layout were stopped');
  const now = [...workers()];
  t.equal(now.length, 3, 'three processes now');
  t.ok(now.every((p) => p !== undefined && !first.includes(p) && alive(p)));
  const mine = pidsMentioning(state).filter((p) => p !== hubFile(state)!.pid);
  t.same(mine.sort(), [...now].sort(), 'no worker process of the swarm is left unsupervised');
  const sub = swarm(['submit', 'after', '--wait', '--state-dir', state]);
  t.equal(sub.stdout, 'echo: after\n', sub.stderr);
  const st = await api<{ workers: { id: string }[] }>(state, 'GET', '/status');
  t.same(st.workers.map((w) => w.id).sort(), [...ids].sort(), 'six workers, each once');

  // Fewer agents than before: the processes of the ids not wanted now are stopped too.
  await crash();
  const fewer = swarm(['up', '--procs', '1', ...common.map((a) => (a === '6' ? '2' : a))]);
  t.equal(fewer.code, 0, fewer.stderr);
  t.ok(await until(() => now.slice(1).every((p) => !alive(p!)), 10_000), 'the processes of w-3..w-6 were stopped');
  t.ok(alive(now[0]!), 'the one of w-1 and w-2 (what is wanted now) adopted');
  t.ok(await until(async () => (await api<{ workers: { id: string }[] }>(state, 'GET', '/status').catch(() => ({ workers: [] }))).workers.length === 2, 10_000), 'two workers');
  t.ok(alive(hubFile(state)!.pid), 'the hub lives');
  t.equal(pidsMentioning(state).filter((p) => p !== hubFile(state)!.pid).length, 1, 'in one process, and no other left');
  t.same(fs.readdirSync(path.join(state, 'pids')).sort(), ['w-1.pid', 'w-2.pid'], 'the pid files of the ids not wanted are gone');
});

t.test('POST /workers/ID/kill on one worker of a shared process: it starts again in it, the others are not touched', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  const up = swarm(['up', '--agents', '3', '--procs', '1', '--driver', 'echo', '--no-failover', '--dead-after-ms', '400', '--heartbeat-ms', '100', '--detach', '--state-dir', state]);
  t.equal(up.code, 0, 'up');
  const pid = (JSON.parse(fs.readFileSync(path.join(state, 'pids', 'w-1.pid'), 'utf8')) as { pid: number }).pid;
  const hub = hubFile(state)!;
  const logs = () => fs.readFileSync(path.join(state, 'logs', 'w-1.log'), 'utf8');
  t.same(await api(state, 'POST', '/workers/w-2/kill'), { ok: true });
  t.ok(await until(() => /agent killed by the hub; starting it again/.test(logs()), 10_000), 'the process starts w-2 again');
  t.ok(await until(async () => (await api<{ workers: { id: string; pid: number }[] }>(state, 'GET', '/status')).workers.length === 3, 10_000), 'w-2 rejoined');
  // Past the reconnect grace (2 x dead_after = 800 ms from the drop): the process was not killed for w-2's dropped link.
  await new Promise((r) => setTimeout(r, 1000));
  t.ok(alive(pid), 'the process lives');
  const st = await api<{ workers: { id: string; pid: number }[] }>(state, 'GET', '/status');
  t.same(st.workers.map((w) => w.pid), [pid, pid, pid], 'all three in the same process');
  t.notMatch(fs.readFileSync(path.join(state, 'logs', 'hub.log'), 'utf8'), /killing its process/, 'the supervisor killed nothing');
  const sub = swarm(['submit', 'still here', '--wait', '--state-dir', state]);
  t.equal(sub.stdout, 'echo: still here\n');
  t.equal(hubFile(state)!.pid, hub.pid);
});

t.test('what a worker runs does not inherit its secrets: an exec command sees no credential or peer secret', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  for (const procs of ['auto', '2']) {
    const up = swarm(['up', '--agents', '2', '--procs', procs, '--driver', 'exec', '--driver-opt', 'cmd=env', '--detach', '--state-dir', state]);
    t.equal(up.code, 0, `up --procs ${procs}`);
    const token = hubFile(state)!.token!;
    const sub = swarm(['submit', 'hello', '--wait', '--state-dir', state]);
    t.equal(sub.code, 0);
    t.match(sub.stdout, /SWARM_PROMPT=hello/, 'the command ran and printed its environment');
    t.notMatch(sub.stdout, /SWARM_TOKEN|SWARM_CREDENTIALS|SWARM_PEER_TOKEN|wc1\.|wp1\./, 'no secret in it');
    t.notOk(sub.stdout.includes(token), 'nor the swarm token');
    t.equal(swarm(['down', '--state-dir', state]).code, 0);
  }
});
