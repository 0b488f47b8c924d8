import t from 'tap';
import { hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { agents, allInMode, hubDone, killGroup, startHub, submit, expectExactlyOnce, expectReplicasDone, type Proc } from '../helpers/failover.js';

t.test('swarm up --failover: the hub killed mid-run, the supervised workers finish by gossip, a new hub gets every result once', async (t) => {
  const dir = tempDir(t);
  const N = 6;
  const TASKS = 200;
  let hub2: Proc | undefined;
  t.teardown(() => killGroup(hub2));
  const up = swarm(['up', '--agents', String(N), '--driver', 'echo', '--driver-opt', 'latency_ms=50', '--failover', '--detach', '--state-dir', dir]);
  t.equal(up.code, 0, up.stderr);
  const ids = await submit(dir, TASKS);
  t.ok(await until(() => agents(dir).some((a) => a.replica.done >= 20), 20_000, 20), 'the run is under way');
  const before = JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout || '{}') as { failover?: { holders?: string[]; keepers?: string[] } };
  t.ok(before.failover?.holders?.length, `status --json names the replica holders: ${before.failover?.holders?.join(', ')}`);
  t.ok(Array.isArray(before.failover?.keepers), `and the keepers of the open tasks: ${before.failover?.keepers?.join(', ') || 'none'}`);
  t.match(swarm(['status', '--state-dir', dir]).stdout, new RegExp(`replicas held by ${before.failover?.holders?.[0]}`), 'the text status says who holds the replicas');
  const pid = hubFile(dir)!.pid;
  process.kill(pid, 'SIGKILL');
  t.ok(await allInMode(dir, 'gossip', N, 20_000), 'every supervised worker went to gossip mode');
  const st = JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout || '{}') as { hub?: { mode?: string; coordinator?: string } };
  t.equal(st.hub?.mode, 'gossip', 'swarm status shows gossip mode and who coordinates');
  t.ok(st.hub?.coordinator, `coordinator ${st.hub?.coordinator}`);
  await expectReplicasDone(t, dir, TASKS, 60_000, 'the workers finished the run without a hub');
  hub2 = await startHub(dir);
  t.ok(await hubDone(dir, TASKS, 30_000), 'the new hub has every task final');
  expectExactlyOnce(t, dir, ids);
});
