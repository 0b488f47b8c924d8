import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, sleep, swarmBg, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, assertOncePerTask, hubDone, hubStatus, killGroup, procs, startHub, startWorkers, submit, type AgentView } from '../helpers/failover.js';

/**
 * Attempts in gossip mode count real failures, not starvation. A member whose process is stopped
 * (SIGSTOP; a swap storm or a starved machine does the same) past its death in the acting
 * coordinator's view loses its leases, which go to other members; that is a lost lease, not a failed
 * run, and sched bounds those as the hub does, so with `--max-attempts 1` no task may end
 * SWARM_ERR_RETRIES_EXHAUSTED, and the stopped member's late results are recorded once. A task that
 * really kills the worker process running it still fails for good after its bounded leases.
 */
const HUB_ARGS = ['--max-attempts', '1', '--heartbeat-ms', '250'];
const WORKER_ARGS = ['--hub-lapse-ms', '1500'];
const STOP_MS = Number(process.env.SWARM_TEST_STOP_MS ?? 12_000);

const coordinatorOf = (as: AgentView[]) => as.find((a) => a.coordinating && a.mode === 'gossip');

t.test('a member stopped past its death in gossip mode: no attempt used up, every result once', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  let hub = ps.add(await startHub(dir, HUB_ARGS));
  const args = ['--driver-opt', 'latency_ms=300', ...WORKER_ARGS];
  ps.add(startWorkers(dir, 3, 'a', args));
  const stopped = ps.add(startWorkers(dir, 3, 'b', args));
  ps.add(startWorkers(dir, 3, 'c', args));
  t.teardown(() => killGroup(stopped, 'SIGCONT'));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === 9, 30_000, 100), 'nine workers joined with a peer port');
  const ids = await submit(dir, 240);
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= 20, 30_000, 20), 'the run is under way');

  killGroup(hub, 'SIGKILL');
  t.ok(await allInMode(dir, 'gossip', 9, 30_000), 'every member is in gossip mode');
  // Members run gossip-mode assignments now; b's three hold a lease each when they stop.
  await until(() => (coordinatorOf(agents(dir))?.replica.done ?? 0) >= 60, 20_000, 20);
  killGroup(stopped, 'SIGSTOP');
  t.comment(`b stopped at ${coordinatorOf(agents(dir))?.replica.done} done in the coordinator's replica`);
  await sleep(STOP_MS);
  killGroup(stopped, 'SIGCONT');

  const finished = await until(() => { const c = coordinatorOf(agents(dir)); return !!c && c.replica.done + c.replica.failed === ids.length; }, 60_000, 100);
  const c = coordinatorOf(agents(dir));
  t.ok(finished, `every task final in the acting coordinator's replica (${JSON.stringify(c?.replica)})`);
  t.comment(`acting coordinator ${c?.id}: leases ${JSON.stringify(c?.leases)}`);
  t.ok((c?.leases?.revoked ?? 0) >= 1, 'the stopped member\'s leases were taken back and run elsewhere');
  t.equal(c?.replica.failed, 0, 'no task failed in gossip mode');

  hub = ps.add(await startHub(dir, HUB_ARGS));
  t.ok(await hubDone(dir, ids.length, 60_000), 'the returning hub has every task final');
  t.ok(await allInMode(dir, 'star', 9, 60_000), 'every member is back in star mode');
  assertOncePerTask(t, dir, ids);
});

t.test('a task that kills every worker process that runs it still fails for good in gossip mode', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  const mark = path.join(dir, 'hub-killed');
  // The crash task holds its first worker's slot until the hub is gone, so that every lease that
  // kills a worker is the acting coordinator's (the hub would bound its own the same way).
  const cmd = `case "$SWARM_PROMPT" in crash*) while [ ! -e '${mark}' ]; do sleep 0.1; done; kill -9 $PPID; sleep 5;; *) sleep 0.1; printf 'echo: %s' "$SWARM_PROMPT";; esac`;
  const hub = ps.add(await startHub(dir, HUB_ARGS));
  const names = ['a', 'b', 'c', 'd', 'e', 'f'];
  const ws = names.map((id) => ps.add(swarmBg(['worker', '--state-dir', dir, '--id', id, '--failover', '--driver', 'exec', '--driver-opt', `cmd=${cmd}`,
    '--log-file', path.join(dir, `${id}.log`), ...WORKER_ARGS])));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === names.length, 30_000, 100), 'six worker processes joined with a peer port');
  const ids = await submit(dir, 30);
  const { accepted } = await api<{ accepted: unknown[] }>(dir, 'POST', '/tasks', { tasks: [{ id: 'crash', prompt: 'crash' }] });
  t.equal(accepted.length, 1, 'the crash task is accepted');
  t.ok(await until(async () => ((await hubStatus(dir))?.tasks.done ?? 0) >= ids.length, 30_000, 20), 'the other tasks ran on the hub');

  killGroup(hub, 'SIGKILL');
  fs.writeFileSync(mark, '');
  const ended = await until(() => { const c = coordinatorOf(agents(dir)); return !!c && c.replica.failed === 1; }, 60_000, 100);
  const c = coordinatorOf(agents(dir));
  const dead = ws.filter((w) => w.child.exitCode !== null || w.child.signalCode !== null).length;
  t.comment(`worker processes killed by the task: ${dead}; acting coordinator ${c?.id}: leases ${JSON.stringify(c?.leases)}, replica ${JSON.stringify(c?.replica)}`);
  t.ok(ended, 'the crash task failed for good in the acting coordinator\'s replica');
  t.ok(dead >= 2 && dead < names.length, `it killed a bounded number of worker processes (${dead} of ${names.length}), more than one`);
  t.equal(c?.replica.done, ids.length, 'every other task is done');
  // Its leases ran out by sched's bound on lost leases (3 x max-attempts), not by the first loss.
  await sleep(2000);
  t.equal(ws.filter((w) => w.child.exitCode !== null || w.child.signalCode !== null).length, dead, 'no worker process died after its failure');
});

