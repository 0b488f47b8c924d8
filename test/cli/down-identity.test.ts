import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { alive, hubFile, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';

// Old-format records (no start time) name a pid, nothing more: a loose match on the command line
// would take a `tail -f` of the log, or another swarm's hub, for this swarm's processes.
t.test('swarm down leaves alone a tail -f of the hub log and another swarm\'s hub named by old-format records', async (t) => {
  const base = tempDir(t);
  const a = path.join(base, 'state'), b = path.join(base, 'state2');
  const other = swarmBg(['hub', '--state-dir', b]);
  t.teardown(() => { try { process.kill(-other.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => hubFile(b) !== undefined, 30_000), `the other swarm's hub is up: ${other.output()}`);
  const hubB = hubFile(b)!;

  fs.mkdirSync(path.join(a, 'logs'), { recursive: true });
  const log = path.join(a, 'logs', 'hub.log');
  fs.writeFileSync(log, '');
  const tail = spawn('tail', ['-f', log], { stdio: 'ignore' });
  t.teardown(() => { tail.kill('SIGKILL'); });
  // hub.json and pid files as an older swarm wrote them: pids, no start times.
  fs.writeFileSync(path.join(a, 'hub.json'), JSON.stringify({ ...hubB, pid: tail.pid, proc_start: undefined }));
  fs.mkdirSync(path.join(a, 'pids'));
  fs.writeFileSync(path.join(a, 'pids', 'w-1.pid'), String(tail.pid));
  fs.writeFileSync(path.join(a, 'pids', 'w-2.pid'), String(hubB.pid));

  const r = swarm(['down', '--state-dir', a, '--json']);
  t.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { stopped: boolean; killed_leftovers: number; not_ours: number[]; warnings: string[] };
  t.equal(out.stopped, false, 'no hub of this state dir was stopped');
  t.equal(out.killed_leftovers, 0);
  t.same(out.not_ours.sort(), [tail.pid!, hubB.pid].sort(), 'both pids reported as not ours');
  t.match(r.stderr, /hub\.json names pid \d+ without a start time/, 'the old hub.json is warned about');
  t.match(r.stderr, /pid file\(s\) without a start time/, 'the old pid files are warned about');
  t.ok(alive(tail.pid!), 'the tail -f of the hub log survives');
  t.ok(alive(hubB.pid), 'the other swarm\'s hub survives');
  t.equal(swarm(['status', '--state-dir', a]).code, 3, 'an old hub.json names no running swarm');

  const rb = swarm(['down', '--state-dir', b, '--json']);
  t.equal(rb.code, 0, rb.stderr);
  t.equal((JSON.parse(rb.stdout) as { stopped: boolean }).stopped, true, 'its own down stops the other swarm');
  t.ok(await until(() => !alive(hubB.pid), 10_000), 'the other hub is gone');
});
