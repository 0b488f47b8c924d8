import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { electHolders } from '../../hub/holders.js';
import { CLI } from '../helpers/cli.js';
import { startHub, waitWorkers } from '../helpers/inproc.js';

const ids = (ws: { id: string }[]) => ws.map((w) => w.id);

t.test('holders: one per process, hosts first; pids alone do not tell containers apart', async (t) => {
  // Three containers: every worker is PID 1; the host ids differ.
  const pods = ['a', 'b', 'c'].flatMap((h) => [1, 2].map((i) => ({ id: `w${h}-${i}`, pid: 1, host: `pod-${h}` })));
  t.same(ids(electHolders(pods, 3)), ['wa-1', 'wb-1', 'wc-1'], 'three pods: three holders, one per pod');
  // Before host ids: pid 1 everywhere made one process of them.
  t.same(ids(electHolders(pods.map(({ id, pid }) => ({ id, pid })), 3)), ['wa-1'], 'grouped by pid: one holder (the old election)');
  // One host, several processes: the lowest id of each process, as before.
  const local = [{ id: 'w-1', pid: 10, host: 'h' }, { id: 'w-2', pid: 10, host: 'h' }, { id: 'w-3', pid: 11, host: 'h' }, { id: 'w-4', pid: 12, host: 'h' }, { id: 'w-5', pid: 13, host: 'h' }];
  t.same(ids(electHolders(local, 3)), ['w-1', 'w-3', 'w-4']);
  // Hosts first: host A's second process waits until every host has one.
  const mixed = [{ id: 'a1', pid: 1, host: 'A' }, { id: 'a2', pid: 2, host: 'A' }, { id: 'b1', pid: 1, host: 'B' }, { id: 'c1', pid: 1, host: 'C' }];
  t.same(ids(electHolders(mixed, 3)), ['a1', 'b1', 'c1']);
  t.same(ids(electHolders(mixed, 4)), ['a1', 'a2', 'b1', 'c1']);
  t.same(ids(electHolders([{ id: 'x' }, { id: 'y' }], 3)), ['x', 'y'], 'workers that report neither are processes of their own');
});

const root = process.getuid?.() === 0 && spawnSync('unshare', ['--pid', '--fork', '--kill-child', 'true']).status === 0;

t.test('workers in three pid namespaces (each PID 1) give three holders', { skip: root ? false : 'needs root and unshare' }, async (t) => {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  const kids: ChildProcess[] = [];
  t.teardown(() => { for (const k of kids) try { process.kill(-k.pid!, 'SIGKILL'); } catch { /* gone */ } });
  for (const h of ['ns-a', 'ns-b', 'ns-c']) {
    const env = { ...process.env };
    delete env.SWARM_HOST_ID;
    kids.push(spawn('unshare', ['--pid', '--fork', '--kill-child', process.execPath, CLI, 'worker', '--hub', `127.0.0.1:${addr.port}`,
      '--count', '2', '--id', h, '--failover', '--driver', 'echo', '--log-file', '/dev/null'], { detached: true, stdio: 'ignore', env }));
  }
  t.ok(await waitWorkers(hub, 6, 30_000), 'six workers joined');
  const ws = [...hub.registry.all()];
  t.same([...new Set(ws.map((w) => w.pid))], [1], 'every worker process is PID 1 in its namespace');
  t.equal(new Set(ws.map((w) => w.host)).size, 3, 'three host ids');
  const deadline = Date.now() + 10_000;
  while (hub.failover.holders().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.same(hub.failover.holders().sort(), ['ns-a-1', 'ns-b-1', 'ns-c-1'], 'one holder per namespace');
});
