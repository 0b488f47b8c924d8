import t, { type Test } from 'tap';
import { until } from '../helpers/cli.js';
import { expectExactlyOnce, type AgentView } from '../helpers/failover.js';
import { requireNamespaces } from '../helpers/netns.js';
import { hostsSwarm, logEvents, taskFile, type HostsSwarm } from '../helpers/hosts-swarm.js';

/**
 * Faults between hosts (network namespaces on a bridge): the hub's whole host dies, or one worker
 * host is cut off the network and plugged back in. Counted in the hub's journal: lost 0, twice 0.
 */

const N = 300;
// Fast failure detection so the test stays short: the hub declares a silent worker dead after 3 s.
// It checks every half heartbeat and a worker's last frame is at most a heartbeat old when the link
// goes, so the hub drops a cut-off worker 2.5-3.25 s after the cut (dead-after - heartbeat to
// dead-after + heartbeat/2), plus whatever the load delays its timers by.
const HEARTBEAT_MS = 500, DEAD_AFTER_MS = 3000;
const hubArgs = ['--heartbeat-ms', String(HEARTBEAT_MS), '--dead-after-ms', String(DEAD_AFTER_MS)];

async function upWithTasks(t: Test, latencyMs: number): Promise<{ sw: HostsSwarm; ids: string[] }> {
  const sw = hostsSwarm(t, { latencyMs, hubArgs });
  await sw.startHub();
  sw.startWorkers(sw.b, 3);
  sw.startWorkers(sw.c, 3);
  t.ok(await until(() => sw.status()?.workers?.length === 6, 60_000, 500), 'six workers on B and C joined the hub on A');
  t.ok(await until(() => sw.agents().length === 6, 30_000, 200), 'every worker writes its failover status');
  const { file, ids } = taskFile(sw.dir, N);
  const sub = sw.remote(['submit', '--file', file, '--json']);
  t.equal(sub.code, 0, `${N} tasks submitted with swarm submit --hub-url`);
  return { sw, ids };
}

t.test('the hub\'s host dies mid-run: B and C finish by gossip and hand back to a hub restarted on A: lost 0, twice 0', async (t) => {
  if (!requireNamespaces(t)) return;
  const { sw, ids } = await upWithTasks(t, 100);
  t.ok(await until(() => (sw.status()?.tasks?.done ?? 0) >= 30, 60_000, 300), 'the run is under way');
  const killedAt = Date.now();
  await sw.a.killAll();
  t.same(sw.a.pids(), [], 'every process of host A is gone');
  t.ok(await until(() => { const as = sw.agents(); return as.length === 6 && as.every((x) => x.mode === 'gossip'); }, 30_000, 100), 'B and C went to gossip mode');
  const gossipAt = Date.now();
  t.ok(await until(() => sw.agents().some((x) => x.coordinating && x.replica.done === N), 120_000, 250), 'the acting coordinator has every task done');
  const finishedAt = Date.now();
  await sw.startHub();
  const restartedAt = Date.now();
  t.ok(await until(() => (sw.status()?.tasks?.done ?? 0) === N, 120_000, 500), 'the restarted hub on A has every task done (handed back)');
  t.ok(await until(() => sw.agents().every((x) => x.mode === 'star'), 30_000, 200), 'B and C are back in star mode under the new hub');
  t.comment(`gossip after ${gossipAt - killedAt} ms; all done in gossip ${finishedAt - killedAt} ms after the kill; handback ${Date.now() - restartedAt} ms after the restart`);
  expectExactlyOnce(t, sw.state.a!, ids);
});

t.test('C is cut off from A and B mid-run, then plugged back in: nothing lost, nothing twice, C rejoins', async (t) => {
  if (!requireNamespaces(t)) return;
  const { sw, ids } = await upWithTasks(t, 150);
  const cWorkers = () => (sw.status()?.workers ?? []).filter((w) => w.id.startsWith('c-')).length;
  t.ok(await until(() => (sw.status()?.tasks?.done ?? 0) >= 30, 60_000, 300), 'the run is under way');
  const cutAt = Date.now();
  sw.c.partition();
  t.ok(await until(() => cWorkers() === 0, 30_000, 200), 'the hub drops C\'s workers');
  const detected = Date.now() - cutAt;
  // Long enough for C's side to notice the hub is gone too (its hub lapse is 3 s). C holds 3 of the 6
  // workers, no majority: it suspects the hub but does not fail over (no second queue beside the hub's).
  const cAgents = () => sw.agents().filter((x) => x.id.startsWith('c-')) as (AgentView & { hub?: string })[];
  t.ok(await until(() => cAgents().every((x) => x.hub !== undefined && x.hub !== 'alive'), 20_000, 200), 'C\'s agents noticed the hub is gone (hub suspect)');
  t.ok(cAgents().every((x) => x.mode === 'star' && !x.coordinating), 'and, a minority, did not fail over');
  const cMode = cAgents().map((x) => `${x.mode}/${x.hub}`).join(',');
  const healAt = Date.now();
  sw.c.heal();
  t.ok(await until(() => cWorkers() === 3, 60_000, 300), 'C\'s workers rejoin the hub');
  const rejoined = Date.now() - healAt;
  t.ok(await until(() => (sw.status()?.tasks?.done ?? 0) === N, 120_000, 500), 'every task done');
  t.ok(await until(() => sw.agents().every((x) => x.mode === 'star'), 30_000, 200), 'every agent, C\'s too, is back in star mode');
  // From the processes' own logs (one clock: every host is a namespace of this machine), finer than
  // the polls above, which each start a CLI process.
  const isC = (e: { worker?: string }) => e.worker?.startsWith('c-') ?? false;
  const hubLog = logEvents(sw.state.a!, 'hub-');
  const dropped = hubLog.filter((e) => e.msg === 'worker left' && isC(e) && e.time >= cutAt && e.time < healAt).map((e) => e.time - cutAt);
  const joined = hubLog.filter((e) => e.msg === 'worker joined' && isC(e) && e.time >= healAt).map((e) => e.time - healAt);
  const cLost = logEvents(sw.state.c!, 'c-').filter((e) => e.msg === 'disconnected from hub' && e.time >= cutAt && e.time < healAt).map((e) => e.time - cutAt);
  const span = (xs: number[]) => xs.length ? `${Math.min(...xs)}-${Math.max(...xs)} ms` : 'none logged';
  t.equal(dropped.length, 3, 'the hub logged dropping each of C\'s workers');
  t.comment(`detection: the hub dropped C's workers ${span(dropped)} after the cut (logged; heartbeat ${HEARTBEAT_MS} ms, dead-after ${DEAD_AFTER_MS} ms: ` +
    `${DEAD_AFTER_MS - HEARTBEAT_MS}-${DEAD_AFTER_MS + HEARTBEAT_MS / 2} ms expected), ${detected} ms by polling swarm status; C's agents dropped their hub link ${span(cLost)} after the cut, then: ${cMode}`);
  t.comment(`rejoin: C's workers joined the hub again ${span(joined)} after the heal (logged; reconnect backoff at most 2000 ms, randomised), ${rejoined} ms by polling`);
  expectExactlyOnce(t, sw.state.a!, ids);
});
