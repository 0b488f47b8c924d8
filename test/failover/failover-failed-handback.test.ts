import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, journal, swarmBg, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, expectExactlyOnce, hubDone, hubStatus, killGroup, procs, startHub, submit } from '../helpers/failover.js';

/**
 * A task that fails for good while the hub is away (the acting coordinator's verdict: its attempts
 * used up) is handed back as that failure: the returning hub records it failed, once, with the
 * error decided in gossip mode, and never runs it again; the client waiting on it gets that failure.
 *
 * The exec driver runs every task: `FAIL…` prompts exit 3 (and count their runs in a file), `task h-…`
 * prompts sleep, so the failing task is still queued on the hub, not leased, when the hub dies.
 */
const N = 3;

t.test('a task failed for good in gossip mode is recorded failed once after the hub returns, never rerun', async (t) => {
  const dir = tempDir(t);
  const ps = procs(t);
  const runs = path.join(dir, 'fail-runs');
  const cmd = `case "$SWARM_PROMPT" in FAIL*) echo run >> '${runs}'; echo 'refused on purpose' >&2; exit 3;; 'task h-'*) sleep 6; printf 'echo: %s' "$SWARM_PROMPT";; *) printf 'echo: %s' "$SWARM_PROMPT";; esac`;
  let hub = ps.add(await startHub(dir));
  ps.add(swarmBg(['worker', '--state-dir', dir, '--count', String(N), '--id', 'w', '--failover', '--driver', 'exec', '--driver-opt', `cmd=${cmd}`,
    '--log-file', path.join(dir, 'w.log')]));
  t.ok(await until(async () => (await hubStatus(dir))?.failover?.workers.length === N, 30_000, 100), 'all workers joined with a peer port');

  // Every slot busy for a while, then the task that will fail and the rest queued behind.
  const holds = ['h-0', 'h-1', 'h-2'];
  await api(dir, 'POST', '/tasks', { tasks: holds.map((id) => ({ id, prompt: `task ${id}` })) });
  t.ok(await until(async () => (await hubStatus(dir))?.tasks.leased === N, 20_000, 20), 'every slot holds a task');
  // The client submits the failing task and waits, across the hub's absence.
  const client = ps.add(swarmBg(['submit', 'FAIL x-1', '--id', 'x-1', '--wait', '--json', '--retry-for', '120000', '--state-dir', dir]));
  const ids = await submit(dir, 20, 't');
  t.ok(await until(() => agents(dir).some((a) => a.replica.size >= 24), 20_000, 50), 'the replicas hold the queued tasks');
  t.equal((await hubStatus(dir))?.tasks.leased, N, 'x-1 is still queued on the hub');
  killGroup(hub, 'SIGKILL');

  t.ok(await allInMode(dir, 'gossip', N, 20_000), 'every worker went to gossip mode');
  t.ok(await until(() => agents(dir).some((a) => a.replica.failed === 1 && a.replica.done === 23), 60_000, 100), 'the run ended without the hub: x-1 failed for good, the rest done');
  const ranInGossip = fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean).length;
  t.equal(ranInGossip, 3, 'x-1 ran its 3 attempts in gossip mode');
  t.notOk(journal(dir).some((r) => r.id === 'x-1' && r.t === 'fail'), 'the dead hub never recorded it');

  hub = ps.add(await startHub(dir));
  t.ok(await hubDone(dir, 24, 30_000), 'the returned hub has every task final');
  t.ok(await allInMode(dir, 'star', N, 20_000), 'every worker is back in star mode');

  const fails = (journal(dir) as { t: string; id?: string; error?: { code: string; msg: string } }[]).filter((r) => r.t === 'fail');
  t.equal(fails.length, 1, 'one failure journaled');
  t.equal(fails[0]?.id, 'x-1');
  t.equal(fails[0]?.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED', 'with the code decided in gossip mode');
  t.match(fails[0]?.error?.msg, /failed 3 time\(s\); last: SWARM_ERR_TASK_FAILED: .*refused on purpose/, 'and its message');
  const view = await api<{ state: string; error?: { code: string }; attempts: number }>(dir, 'GET', '/tasks/x-1');
  t.match(view, { state: 'failed', error: { code: 'SWARM_ERR_RETRIES_EXHAUSTED' } }, 'GET /tasks/x-1 shows the failure');
  // Two ways in, both without a run: the handback (attempts: the 3 of gossip mode), or, when the
  // restarted hub leased x-1 before the handback reached it, the leased agent's answer from its replica.
  const f = (await hubStatus(dir))?.failover as unknown as { recorded: number; leaseHeld: number };
  t.comment(`x-1 recorded ${view.attempts === 3 ? 'from the handback' : `from a lease's answer (attempts ${view.attempts})`}; handback recorded ${f.recorded}, left to a lease ${f.leaseHeld}`);

  // The waiting client got that failure (exit code: tasks failed).
  const code = await new Promise<number | null>((resolve) => { if (client.child.exitCode !== null) resolve(client.child.exitCode); else client.child.once('exit', (c) => resolve(c)); });
  t.not(code, 0, 'swarm submit --wait exits with the failure');
  t.match(client.output(), /"failed":1.*"id":"x-1".*"state":"failed".*SWARM_ERR_RETRIES_EXHAUSTED/s, 'and prints it');

  // Never run again: give the hub a moment to dispatch it if it were queued.
  await until(() => false, 1500, 100);
  t.equal(fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean).length, ranInGossip, 'x-1 was not run again after the hub returned');
  const s = await hubStatus(dir);
  t.match(s?.tasks, { failed: 1, done: 23, queued: 0, leased: 0 });
  expectExactlyOnce(t, dir, [...holds, ...ids]);
});
