import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { hubFile, pidsMentioning, swarm, tempDir, until, alive } from '../helpers/cli.js';

/**
 * With no hub, `swarm status` reads the workers' failover status files. Right after every worker
 * died (a host's OOM killer, `kill -9` of the lot), their files were seconds old and status said the
 * swarm ran in gossip mode with an acting coordinator (exit 0). Files whose pid is dead (or another
 * process now) are named as left over and never shown as a live swarm.
 */

t.test('status after a failover names failover files of dead workers as stale, not as a running swarm', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  let r = swarm(['up', '-d', '--driver', 'echo', '--agents', '3', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  const hub = hubFile(dir)!.pid;
  process.kill(hub, 'SIGKILL');
  t.ok(await until(() => swarm(['status', '--state-dir', dir]).stdout.includes('mode gossip'), 60_000), 'the workers fall back to gossip');

  // A file a dead worker process left beside the live one's, fresh: noted, not counted.
  const failover = path.join(dir, 'failover');
  const [live] = fs.readdirSync(failover).filter((n) => n.endsWith('.json'));
  const rec = JSON.parse(fs.readFileSync(path.join(failover, live!), 'utf8')) as { pid: number; at: number };
  let dead = 4_000_000;
  while (alive(dead)) dead++;
  fs.writeFileSync(path.join(failover, `${dead}.json`), JSON.stringify({ ...rec, pid: dead, at: Date.now() }));
  r = swarm(['status', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /workers {2}3 \(from failover status files\); ignored 1 failover status file\(s\) left by worker processes that are gone \(pid \d+: pid \d+ is not alive/);
  const j = JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout) as { workers: unknown[]; stale_status_files: { pid: number; why: string }[] };
  t.equal(j.workers.length, 3, 'the live process\'s three agents only');
  t.same(j.stale_status_files.map((f) => f.pid), [dead]);

  // Every worker process dies at once: their files are seconds old, and say nothing of a swarm.
  const workers = pidsMentioning(dir).filter((p) => p !== process.pid);
  t.ok(workers.length >= 1, 'worker processes found');
  for (const p of workers) process.kill(p, 'SIGKILL');
  t.ok(await until(() => workers.every((p) => !alive(p)), 10_000));
  r = swarm(['status', '--state-dir', dir]);
  t.equal(r.code, 3, 'no running swarm (exit 3), not a gossip swarm');
  t.match(r.stderr, /SWARM_ERR_NO_SWARM/);
  t.match(r.stderr, /ignored 2 failover status file\(s\) left by worker processes that are gone/);
  t.notMatch(r.stdout, /mode gossip/);
  r = swarm(['status', '--json', '--state-dir', dir]);
  t.equal(r.code, 3);
});
