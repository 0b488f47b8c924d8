import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { until } from '../helpers/cli.js';
import { expectExactlyOnce } from '../helpers/failover.js';
import { requireNamespaces, type Host } from '../helpers/netns.js';
import { hostsSwarm, taskFile, HUB_PORT, type HostsSwarm } from '../helpers/hosts-swarm.js';

/**
 * A minority partition does not run a second queue: host B, which holds the lowest worker ids (so
 * it would be the acting coordinator), is cut off from the hub's host and from C for 10 s, then 20 s.
 * Without a quorum of the membership it does not fail over, so the only tasks that run twice are the
 * ones B was running when it was cut off (the hub gives them to C once it drops B's workers).
 * Runs are counted from the exec driver's own logs, one per host: what no result count can show.
 */

const N = 300, PER_HOST = 3;
const hubArgs = ['--heartbeat-ms', '500', '--dead-after-ms', '3000'];

function startExecWorkers(sw: HostsSwarm, h: Host): void {
  const log = path.join(sw.state[h.name]!, 'runs.log');
  const ca = path.join(sw.certs, 'ca.crt');
  h.swarmBg(['worker', '--hub', `${sw.a.addr}:${HUB_PORT}`, '--tls-ca', ca, '--state-dir', sw.state[h.name]!,
    '--count', String(PER_HOST), '--id', h.name, '--failover', '--peer-tls-cert', path.join(sw.certs, `${h.name}.crt`),
    '--peer-tls-key', path.join(sw.certs, `${h.name}.key`), '--peer-tls-ca', ca, '--slots', '1',
    '--driver', 'exec', '--driver-opt', `cmd=sleep 0.1; echo "$SWARM_PROMPT" >> '${log}'; printf 'echo: %s' "$SWARM_PROMPT"`,
    '--log-file', path.join(sw.state[h.name]!, `${h.name}-${Date.now()}.log`)], { env: { SWARM_TOKEN: sw.token } });
}

function runs(sw: HostsSwarm): { runs: number; tasks: number; extra: number } {
  const lines = ['b', 'c'].flatMap((h) => { const f = path.join(sw.state[h]!, 'runs.log'); return fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').filter(Boolean) : []; });
  const tasks = new Set(lines).size;
  return { runs: lines.length, tasks, extra: lines.length - tasks };
}

async function cutLowest(t: Test, cutMs: number): Promise<void> {
  if (!requireNamespaces(t)) return;
  const sw = hostsSwarm(t, { latencyMs: 0, hubArgs });
  await sw.startHub();
  startExecWorkers(sw, sw.b);
  startExecWorkers(sw, sw.c);
  t.ok(await until(() => sw.status()?.workers?.length === 2 * PER_HOST, 60_000, 500), 'workers on B and C joined the hub on A');
  t.ok(await until(() => sw.agents().length === 2 * PER_HOST, 30_000, 200), 'every worker writes its failover status');
  const { file, ids } = taskFile(sw.dir, N);
  t.equal(sw.remote(['submit', '--file', file, '--json']).code, 0, `${N} tasks submitted`);
  t.ok(await until(() => (sw.status()?.tasks?.done ?? 0) >= 30, 60_000, 300), 'the run is under way');
  const bAgents = () => sw.agents().filter((x) => x.id.startsWith('b-'));
  sw.b.partition();
  const cutAt = Date.now();
  const modes = new Set<string>();
  while (Date.now() - cutAt < cutMs) { for (const x of bAgents()) modes.add(`${x.mode}${x.coordinating ? '+coordinating' : ''}`); await new Promise((r) => setTimeout(r, 250)); }
  sw.b.heal();
  t.notOk([...modes].some((m) => m.includes('coordinating') || m === 'gossip'), `B never coordinated nor went to gossip mode while cut off (its agents' modes: ${[...modes].join(', ')})`);
  t.ok(await until(() => (sw.status()?.tasks?.done ?? 0) === N, 180_000, 500), 'every task done');
  t.ok(await until(() => sw.agents().every((x) => x.mode === 'star'), 60_000, 250), 'every agent in star mode');
  await until(() => { const s = sw.status(); return !!s && s.tasks.leased === 0; }, 20_000, 250);
  const r = runs(sw);
  const bound = PER_HOST; // one slot per agent, no queue: tasks of 100 ms are never prefetched
  t.comment(`B cut off ${cutMs / 1000} s: runs=${r.runs} tasks run=${r.tasks} ran twice=${r.extra} (B had at most ${bound} in flight)`);
  t.equal(r.tasks, N, 'every task ran');
  t.ok(r.extra <= bound, `tasks run twice: ${r.extra}, at most the ${bound} B had in flight`);
  expectExactlyOnce(t, sw.state.a!, ids);
}

t.test('the lowest-id host cut off for 10 s: no second queue', (t) => cutLowest(t, 10_000));
t.test('the lowest-id host cut off for 20 s: no second queue', (t) => cutLowest(t, 20_000));
