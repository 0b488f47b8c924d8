import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { CLI, ROOT, alive, sleep, swarm, tempDir, until } from '../helpers/cli.js';
import { writePidFile } from '../../hub/proc-id.js';

/**
 * What `swarm down` reads of processes in other pid namespaces (a container's, the host's): a pid says
 * something only with its namespace. Two pid files of two namespaces that named the same pid number
 * were taken for one process, and the other was left running; a starting mark written in a namespace
 * the reader cannot see was ignored, so `down` said "no swarm was running" while that start came up.
 */

const UNSHARE = ['--pid', '--fork', '--mount-proc', '--user', '--map-root-user'];
const pidns = spawnSync('unshare', [...UNSHARE, 'true']).status === 0;
const skip = pidns ? false : 'unshare --pid is not permitted here';
const PROC_ID = path.join(ROOT, 'dist/hub/proc-id.js');

function killAll(t: { teardown(fn: () => void): void }, c: ChildProcess): void {
  t.teardown(() => { try { process.kill(-c.pid!, 'SIGKILL'); } catch { try { process.kill(c.pid!, 'SIGKILL'); } catch { /* gone */ } } });
}

/** The host pid of the (single) process whose pid in its own namespace is `nsPid`, under `parent`. */
function hostPidOf(parent: number, nsPid: number): number | undefined {
  for (const n of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(n) || Number(n) === parent) continue;
    try {
      const st = fs.readFileSync(`/proc/${n}/status`, 'utf8');
      const ids = /^NSpid:\s*(.*)$/m.exec(st)?.[1]?.trim().split(/\s+/).map(Number) ?? [];
      if (ids.length > 1 && ids.at(-1) === nsPid && fs.readlinkSync(`/proc/${n}/ns/pid`) !== fs.readlinkSync('/proc/self/ns/pid')) {
        // Ours: a descendant of the unshare we started.
        let p = Number(n);
        for (let i = 0; i < 5 && p > 1; i++) {
          const s = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
          p = Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
          if (p === parent) return Number(n);
        }
      }
    } catch { /* gone */ }
  }
  return undefined;
}

t.test('pid files of two pid namespaces with the same pid number: down stops both processes', { skip }, async (t) => {
  const dir = path.join(tempDir(t), 'state');
  fs.mkdirSync(path.join(dir, 'pids'), { recursive: true, mode: 0o700 });
  // A process of this namespace, named by its pid file as a supervised worker's would be.
  const hostArgs = ['-e', 'setInterval(() => {}, 1000)', 'host-side'];
  const host = spawn(process.execPath, hostArgs, { stdio: 'ignore', detached: true });
  killAll(t, host);
  const pid = host.pid!;
  writePidFile(path.join(dir, 'pids', 'host-worker.pid'), pid, [process.execPath, ...hostArgs]);
  // A process of a new namespace with the same pid number there (the next pid made in it is `pid`),
  // which writes its own pid file as a worker in a container would.
  const script = `import('${PROC_ID}').then((m) => { m.writePidFile(${JSON.stringify(path.join(dir, 'pids', 'ns-worker.pid'))}, process.pid, m.ownCommand()); setInterval(() => {}, 1000); })`;
  const inner = `echo ${pid - 1} > /proc/sys/kernel/ns_last_pid && setsid '${process.execPath}' -e "${script.replace(/"/g, '\\"')}" ns-side; wait`;
  const ns = spawn('unshare', [...UNSHARE, 'sh', '-c', inner], { stdio: 'ignore', detached: true });
  killAll(t, ns);
  t.ok(await until(() => fs.existsSync(path.join(dir, 'pids', 'ns-worker.pid')), 20_000), 'the process in the new namespace wrote its pid file');
  const rec = JSON.parse(fs.readFileSync(path.join(dir, 'pids', 'ns-worker.pid'), 'utf8')) as { pid: number; pidns: string };
  t.equal(rec.pid, pid, 'both pid files name the same pid number');
  t.not(rec.pidns, fs.readlinkSync('/proc/self/ns/pid'), 'in two namespaces');
  const nsHostPid = hostPidOf(ns.pid!, pid);
  t.ok(nsHostPid !== undefined && alive(nsHostPid), 'the namespace\'s process is found from here');
  const down = swarm(['down', '--json', '--state-dir', dir, '--timeout', '3000']);
  t.equal(down.code, 0, `down exits 0 (${down.stdout.trim()} ${down.stderr.trim()})`);
  t.match(JSON.parse(down.stdout), { killed_leftovers: 2, remaining: 0 }, 'down counts two processes, not one');
  t.ok(await until(() => !alive(pid), 5000), 'the process of this namespace is stopped');
  t.ok(await until(() => !alive(nsHostPid!), 5000), 'the process of the other namespace is stopped');
});

t.test('a starting mark of a pid namespace down cannot see: down waits for that start and stops its hub', { skip }, async (t) => {
  const dir = path.join(tempDir(t), 'state');
  fs.mkdirSync(path.join(dir, 'starting'), { recursive: true, mode: 0o700 });
  // A `swarm up` of this (the host's) namespace starting: its mark names a live process here.
  const up = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', 'starting-up'], { stdio: 'ignore', detached: true });
  killAll(t, up);
  writePidFile(path.join(dir, 'starting', `${up.pid}.json`), up.pid!, [process.execPath, '-e', 'setInterval(() => {}, 1000)', 'starting-up']);
  // `swarm down` in a new pid namespace: it sees none of this namespace's processes.
  const down = spawn('unshare', [...UNSHARE, process.execPath, CLI, 'down', '--json', '--state-dir', dir, '--timeout', '30000'], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  killAll(t, down);
  let out = '';
  down.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  down.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const downExited = new Promise<number | null>((r) => down.once('exit', r));
  // The start goes on: its hub comes up a moment later, as `swarm up`'s would.
  await sleep(1500);
  t.equal(down.exitCode, null, `down is still waiting for the start it cannot see (${out.trim()})`);
  // As `swarm up -d` starts it (--ready-fd): a hub it starts does not wait for a `down` (up did).
  const hub = spawn(process.execPath, [CLI, 'hub', '--state-dir', dir, '--port', '0', '--ready-fd', '3'], { stdio: ['ignore', 'ignore', 'ignore', 'pipe'], detached: true });
  killAll(t, hub);
  const code = await Promise.race([downExited, sleep(60_000).then(() => 'timeout' as const)]);
  t.equal(code, 0, `down exits 0 (${out.trim()})`);
  const res = JSON.parse(out.split('\n').find((l) => l.startsWith('{')) ?? '{}') as { stopped?: boolean; remaining?: number };
  t.match(res, { stopped: true, remaining: 0 }, 'down stopped the hub of that start, judged by its answer');
  t.ok(await until(() => !alive(hub.pid!), 10_000), 'the hub is gone');
  t.ok(alive(up.pid!), 'the marked process is not signalled by its pid from the other namespace');
});
