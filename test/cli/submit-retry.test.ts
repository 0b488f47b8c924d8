import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { hubFile, journal, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { hubStatus } from '../helpers/failover.js';

const N = 3000;

/** Tasks without ids, the way a script writes them: the CLI must give them ids before sending. */
function taskFile(dir: string): string {
  const f = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(f, Array.from({ length: N }, (_, i) => JSON.stringify({ prompt: `job ${i}` })).join('\n') + '\n');
  return f;
}

/** Per prompt, how many tasks and results the journal holds: each must be exactly one. */
function perPrompt(dir: string): { tasks: number; lostOrDup: number; results: number; dupResults: number } {
  const recs = journal(dir) as { t: string; id?: string; spec?: { id: string; prompt: string }; text?: string }[];
  const byPrompt = new Map<string, number>();
  const ids = new Set<string>();
  for (const r of recs) if (r.t === 'task' && r.spec) { byPrompt.set(r.spec.prompt, (byPrompt.get(r.spec.prompt) ?? 0) + 1); ids.add(r.spec.id); }
  const results = new Map<string, number>();
  for (const r of recs) if (r.t === 'result' && r.id && ids.has(r.id)) results.set(r.id, (results.get(r.id) ?? 0) + 1);
  let lostOrDup = 0;
  for (let i = 0; i < N; i++) if (byPrompt.get(`job ${i}`) !== 1) lostOrDup++;
  return { tasks: ids.size, lostOrDup, results: results.size, dupResults: [...results.values()].filter((c) => c > 1).length };
}

/** True once the kernel holds bytes of a connection to `port` that nobody has read (the hub is stopped). */
function pendingRequest(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1).some((l) => {
    const f = l.trim().split(/\s+/);
    return f[1]?.endsWith(`:${hex}`) && f[3] === '01' && Number.parseInt(f[4]!.split(':')[1]!, 16) > 0;
  });
}

t.test('submit: the hub is killed -9 holding the upload, swarm up restarts it, the client retries: every task once', async (t) => {
  const dir = tempDir(t);
  const up = ['up', '--agents', '2', '--driver', 'echo', '--detach', '--state-dir', dir];
  t.equal(swarm(up).code, 0);
  const file = taskFile(dir);
  const hub = hubFile(dir)!;
  process.kill(hub.pid, 'SIGSTOP');
  const sub = swarmBg(['submit', '--file', file, '--wait', '--json', '--state-dir', dir]);
  const exited = new Promise<number | null>((r) => sub.child.once('exit', (c) => r(c)));
  t.ok(await until(() => pendingRequest(hub.control.port), 20_000), 'the upload reached the stopped hub');
  process.kill(hub.pid, 'SIGKILL');
  const again = swarm(up);
  t.equal(again.code, 0, 'swarm up restarts the hub');
  const code = await exited;
  t.equal(code, 0, code === 0 ? 'submit exits 0 after retrying' : sub.output().slice(-600));
  t.match(sub.output(), /retrying/, 'it said it retried');
  const res = JSON.parse(sub.output().split('\n').find((l) => l.startsWith('{"complete"')) ?? '{}') as { complete?: boolean; tasks?: { state: string }[] };
  t.equal(res.complete, true);
  t.equal(res.tasks?.filter((x) => x.state === 'done').length, N, 'all done');
  const p = perPrompt(dir);
  t.comment(`tasks=${p.tasks} lost_or_duplicated_submissions=${p.lostOrDup} results=${p.results} duplicated_results=${p.dupResults}`);
  t.same(p, { tasks: N, lostOrDup: 0, results: N, dupResults: 0 });
});

t.test('submit: the acknowledgement is lost after the hub journaled the upload; the retry submits nothing twice', async (t) => {
  const dir = tempDir(t);
  t.equal(swarm(['up', '--agents', '2', '--driver', 'echo', '--detach', '--state-dir', dir]).code, 0);
  const hub = hubFile(dir)!;
  // A proxy in front of the control API that forwards the first request whole, then cuts the
  // connection as the answer starts: the hub has journaled the tasks, the client hears "socket hang up".
  let conns = 0;
  const proxy = net.createServer((client) => {
    const first = conns++ === 0;
    const up = net.connect(hub.control.port, hub.control.host);
    client.pipe(up);
    up.on('data', (c) => { if (first) { client.destroy(); up.destroy(); } else client.write(c); });
    up.on('end', () => client.end());
    const end = () => { client.destroy(); up.destroy(); };
    client.on('error', end); up.on('error', end);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => proxy.close(() => r())));
  const port = (proxy.address() as net.AddressInfo).port;
  // In the background: the proxy runs in this process, which spawnSync would block.
  const sub = swarmBg(['submit', '--file', taskFile(dir), '--wait', '--json', '--hub-url', `http://127.0.0.1:${port}`, '--token', hub.token!]);
  const code = await new Promise<number | null>((r) => sub.child.once('exit', (c) => r(c)));
  t.equal(code, 0, code === 0 ? 'submit exits 0' : sub.output().slice(-600));
  t.match(sub.output(), /upload failed .*retrying/);
  const res = JSON.parse(sub.output().split('\n').find((l) => l.startsWith('{"complete"')) ?? '{}') as { complete: boolean; tasks: { state: string }[] };
  t.equal(res.tasks.filter((x) => x.state === 'done').length, N, 'all done');
  const st = await hubStatus(dir);
  t.equal(st?.tasks.done, N, 'the hub holds each task once');
  const p = perPrompt(dir);
  t.comment(`tasks=${p.tasks} lost_or_duplicated_submissions=${p.lostOrDup} results=${p.results} duplicated_results=${p.dupResults}`);
  t.same(p, { tasks: N, lostOrDup: 0, results: N, dupResults: 0 });
});
