/**
 * A worker process that dies after a long run rejoins, and a large upload runs:
 * `node dist/bench/rejoin.js [tasks=80000] [upload=50000]`. Starts `swarm up --agents 4 --driver echo`,
 * runs `tasks` tasks of ~210 B, kill -9s the worker process and waits 60 s for it to rejoin, runs 200
 * more; then, on a fresh swarm, one POST /tasks of `upload` x 1 KB and waits for every task.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const main = path.resolve('dist/cli/main.js');
const tasks = Number(process.argv[2] ?? 80_000);
const upload = Number(process.argv[3] ?? 50_000);
interface Status { tasks: { done: number; failed: number }; workers: { pid: number }[]; failover?: { fullSyncs: number } }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function up(): { dir: string; api: <T>(m: string, p: string, body?: string) => Promise<T> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-rejoin-'));
  execFileSync('node', [main, 'up', '--agents', '4', '--driver', 'echo', '--state-dir', dir, '-d', '--fsync', 'interval'], { stdio: 'ignore' });
  const hub = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { control: { host: string; port: number }; token?: string };
  const token = hub.token ?? fs.readFileSync(path.join(dir, 'token'), 'utf8').trim();
  const api = async <T>(m: string, p: string, body?: string) => (await (await fetch(`http://${hub.control.host}:${hub.control.port}${p}`, { method: m, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body })).json()) as T;
  return { dir, api };
}

function down(dir: string): void {
  execFileSync('node', [main, 'down', '--state-dir', dir], { stdio: 'ignore' });
  fs.rmSync(dir, { recursive: true, force: true });
}

async function waitDone(api: ReturnType<typeof up>['api'], n: number, ms: number): Promise<Status> {
  const end = Date.now() + ms;
  let s = await api<Status>('GET', '/status');
  while (s.tasks.done + s.tasks.failed < n && Date.now() < end) { await sleep(500); s = await api<Status>('GET', '/status'); }
  return s;
}

{
  const { dir, api } = up();
  const pad = 'x'.repeat(180);
  const t0 = Date.now();
  for (let i = 0; i < tasks; i += 5000) {
    await api('POST', '/tasks', JSON.stringify({ tasks: Array.from({ length: Math.min(5000, tasks - i) }, (_, k) => ({ id: `w-${i + k}`, prompt: `${pad} ${i + k}` })) }));
  }
  const s0 = await waitDone(api, tasks, 300_000);
  const ranMs = Date.now() - t0;
  const pid = s0.workers[0]!.pid;
  process.kill(pid, 'SIGKILL');
  const k0 = Date.now();
  let rejoinMs: number | undefined;
  while (Date.now() - k0 < 60_000) {
    const s = await api<Status>('GET', '/status');
    if (s.workers.length === 4 && !s.workers.some((w) => w.pid === pid)) { rejoinMs = Date.now() - k0; break; }
    await sleep(500);
  }
  await api('POST', '/tasks', JSON.stringify({ tasks: Array.from({ length: 200 }, (_, k) => ({ id: `after-${k}`, prompt: `after ${k}` })) }));
  const s1 = await waitDone(api, tasks + 200, 60_000);
  console.log(JSON.stringify({ scenario: 'kill -9 after a long run', tasks, ran_ms: ranMs, rejoin_ms: rejoinMs ?? 'not in 60 s', after_ran: s1.tasks.done - s0.tasks.done, full_syncs: s1.failover?.fullSyncs }));
  down(dir);
}

if (upload > 0) {
  const { dir, api } = up();
  const pad = 'k'.repeat(1000);
  const body = JSON.stringify({ tasks: Array.from({ length: upload }, (_, i) => ({ id: `b-${i}`, prompt: `${pad} ${i}` })) });
  const t0 = Date.now();
  const r = await api<{ accepted?: unknown[] }>('POST', '/tasks', body);
  const ackMs = Date.now() - t0;
  const s = await waitDone(api, upload, 180_000);
  console.log(JSON.stringify({ scenario: 'one upload', tasks: upload, bytes: body.length, acknowledged: r.accepted?.length ?? 0, ack_ms: ackMs, done: s.tasks.done, run_ms: Date.now() - t0 }));
  down(dir);
}
