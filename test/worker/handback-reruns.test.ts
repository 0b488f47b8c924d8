import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { alive, api, hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, expectExactlyOnce, hubDone, hubStatus, submit } from '../helpers/failover.js';
import { startHub as startHubInProc } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { WORKER_DEFAULTS } from '../../worker/index.js';

/**
 * Runs per task, from the exec driver's own log (each run appends its prompt): what a duplicated
 * result count cannot show, since the hub keeps one result per task however often it ran.
 */
function reruns(file: string): { runs: number; tasks: number; extra: number } {
  const lines = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
  const tasks = new Set(lines).size;
  return { runs: lines.length, tasks, extra: lines.length - tasks };
}

t.test('tasks a returning worker offered are leased to no one until its handback brings them, or its handback is over', async (t) => {
  const { hub, addr, stop } = await startHubInProc();
  const back = await RawWorker.connect(addr);
  const other = await RawWorker.connect(addr);
  t.teardown(async () => { back.destroy(); other.destroy(); await stop(); });
  const ids = Array.from({ length: 10 }, (_, i) => `t-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  // The returning worker joins (it is given t-0, which it never answers) and offers t-1…t-5: its
  // gossip-mode results, which the restarted hub replayed as queued.
  t.equal((await back.handshake({ worker_id: 'back-1', peer_addr: '127.0.0.1:9', slots: 1 }))?.type, 'HANDSHAKE_ACK');
  t.ok(await back.next((f) => f.type === 'TASK_REQ'), 'the returning worker is leased a task');
  const offered = ids.slice(1, 6);
  const o = back.send('HANDBACK', { entries: [], offer: offered });
  t.same((await back.next((f) => f.re === o))?.payload.want, offered, 'the hub wants the offered tasks');
  t.equal(hub.failover.holds.size, 5, 'and holds them');

  const leasedTo = (w: RawWorker) => w.frames.filter((f: Frame) => f.type === 'TASK_REQ').map((f: Frame) => f.payload.task_id as string);
  t.equal((await other.handshake({ worker_id: 'other-1', slots: 16 }))?.type, 'HANDSHAKE_ACK');
  await until(() => leasedTo(other).length >= 4, 5000, 10);
  await new Promise((r) => setTimeout(r, 300));
  t.same(leasedTo(other).sort(), ['t-6', 't-7', 't-8', 't-9'], 'another worker is leased every ready task but the offered ones');

  const e = back.send('HANDBACK', { entries: [
    { id: 't-1', result: { worker: 'back-1', attempt: 1, text: 'one' } },
    { id: 't-2', result: { worker: 'back-1', attempt: 1, text: 'two' } },
  ] });
  t.match((await back.next((f) => f.re === e))?.payload, { ok: true, recorded: 2, duplicate: 0 }, 'the handback records what it brings');
  t.equal(hub.failover.holds.size, 3, 'the rest stay held');
  await new Promise((r) => setTimeout(r, 200));
  t.equal(leasedTo(other).length, 4, 'and are not leased meanwhile');

  // Back in star mode: what it offered and did not send is not coming; those tasks run elsewhere.
  back.send('HEARTBEAT', { load: 0, status: 'idle', mode: 'star', coordinator: 'hub', epoch: 0 });
  t.ok(await until(() => leasedTo(other).length === 7, 5000, 10), 'the tasks it did not hand back are leased again');
  t.same(leasedTo(other).slice(4).sort(), ['t-3', 't-4', 't-5']);
  t.equal(hub.failover.holds.size, 0, 'nothing held');
  back.destroy();
  t.ok(await until(() => leasedTo(other).includes('t-0'), 5000, 10), 'a worker that leaves gives its lease back as before');
});

t.test('hub killed -9 mid-run, the workers finish by gossip, swarm up again: every result once, and no more re-runs than tasks in flight at the kill', async (t) => {
  const dir = tempDir(t);
  const N = 6, TASKS = 600;
  const runLog = path.join(dir, 'runs.log');
  // One worker process (--procs auto for exec): its agents share no replica, so the acting
  // coordinator holds nearly every gossip-mode result and hands them back in 100-entry frames.
  const upArgs = ['up', '--agents', String(N), '--driver', 'exec', '--driver-opt', `cmd=echo "$SWARM_PROMPT" >> '${runLog}'; printf 'echo: %s' "$SWARM_PROMPT"`, '--detach', '--state-dir', dir];
  const up = swarm(upArgs);
  t.equal(up.code, 0, up.stderr);
  const ids = await submit(dir, TASKS);
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= 30, 30_000, 20), 'the run is under way');
  const hubPid = hubFile(dir)!.pid;
  process.kill(hubPid, 'SIGKILL');
  t.ok(await until(() => !alive(hubPid), 5000), 'hub gone');
  t.ok(await allInMode(dir, 'gossip', N, 20_000), 'every agent went to gossip mode');
  t.ok(await until(() => agents(dir).some((a) => a.coordinating && a.replica.done === TASKS), 90_000, 100), 'the acting coordinator has every task done');

  const again = swarm(upArgs);
  t.equal(again.code, 0, `second swarm up: ${again.stdout}${again.stderr}`);
  t.ok(await hubDone(dir, TASKS, 60_000), 'the new hub has every task final');
  t.ok(await allInMode(dir, 'star', N, 30_000), 'every agent handed back and is in star mode');
  // Leases given out before the last handback frame answer late: let them.
  await until(async () => { const s = await hubStatus(dir); return !!s && s.tasks.leased === 0; }, 10_000, 100);
  expectExactlyOnce(t, dir, ids);
  const st = await api<{ tasks: { failed: number }; metrics: { duplicate_results: number } }>(dir, 'GET', '/status');
  t.equal(st.tasks.failed, 0, 'none failed');
  const r = reruns(runLog);
  // In flight at the kill: each agent's slot and its queue places (the hub leases the queue only to
  // agents whose tasks are short); the acting coordinator takes those over after its catch-up wait,
  // and a result that reaches it later costs a re-run.
  const inFlight = N * (WORKER_DEFAULTS.agent.slots + WORKER_DEFAULTS.agent.queue);
  t.comment(`runs=${r.runs} tasks run=${r.tasks} extra runs=${r.extra} duplicate TASK_RES=${st.metrics.duplicate_results} (bound ${inFlight})`);
  t.equal(r.tasks, TASKS, 'every task ran');
  t.ok(r.extra <= inFlight, `tasks run twice: ${r.extra}, at most the ${inFlight} in flight at the kill`);
  t.ok(st.metrics.duplicate_results <= inFlight, `duplicate TASK_RES: ${st.metrics.duplicate_results}, at most the ${inFlight} in flight`);
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});
