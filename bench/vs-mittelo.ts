/**
 * 5,000 echo tasks through 25 agents: this swarm (`swarm up -n 25 --driver echo`, failover on, the
 * default) against the Python peer implementation (taituo/mittelo, stdlib only) in one run, both on
 * loopback. `node dist/bench/vs-mittelo.js <mittelo checkout> [tasks=5000] [agents=25]`.
 * Time is from the first task submitted to the last one done.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const repo = process.argv[2];
if (!repo) { process.stderr.write('usage: node dist/bench/vs-mittelo.js <mittelo checkout> [tasks] [agents]\n'); process.exit(2); }
const tasks = Number(process.argv[3] ?? 5000);
const agents = Number(process.argv[4] ?? 25);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One JSON-lines request/response connection to a mittelo hub. */
function jsonl(port: number) {
  const sock = net.connect({ host: '127.0.0.1', port });
  let buf = '';
  const waiting: ((v: Record<string, unknown>) => void)[] = [];
  sock.on('data', (d) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) { const line = buf.slice(0, i); buf = buf.slice(i + 1); waiting.shift()?.(JSON.parse(line) as Record<string, unknown>); }
  });
  let n = 0;
  const call = (method: string, params: unknown) => new Promise<Record<string, unknown>>((resolve) => { waiting.push(resolve); sock.write(JSON.stringify({ id: ++n, method, params }) + '\n'); });
  return { call, ready: new Promise((r) => sock.once('connect', r)), close: () => sock.destroy() };
}

async function mittelo(): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mittelo-'));
  const hub = spawn('python3', ['-m', 'mittelo', 'hub', '--db', path.join(dir, 'm.db'), '--host', '127.0.0.1', '--port', '0', '--print-url'], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => hub.stdout!.once('data', (d: Buffer) => resolve(Number(/:(\d+)/.exec(d.toString())![1]))));
  const procs: ChildProcess[] = [hub];
  try {
    for (let i = 0; i < agents; i++) procs.push(spawn('python3', ['-m', 'mittelo', 'agent', '--host', '127.0.0.1', '--port', String(port), '--backend', 'echo'], { cwd: repo, stdio: 'ignore' }));
    await sleep(2000);
    const c = jsonl(port);
    await c.ready;
    const t0 = Date.now();
    for (let i = 0; i < tasks; i++) await c.call('enqueue', { prompt: `task ${i}` });
    for (;;) {
      const r = await c.call('stats', {}) as { result?: { stats?: Record<string, number> } } & Record<string, unknown>;
      const st = (r.result?.stats ?? (r as { stats?: Record<string, number> }).stats ?? {}) as Record<string, number>;
      if ((st.done ?? 0) + (st.failed ?? 0) >= tasks) break;
      if (Date.now() - t0 > 600_000) throw new Error(`mittelo: not done in 600 s: ${JSON.stringify(st)}`);
      await sleep(200);
    }
    const ms = Date.now() - t0;
    c.close();
    return ms;
  } finally {
    for (const p of procs) p.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function swarm(): Promise<number> {
  const main = path.resolve('dist/cli/main.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-vs-'));
  execFileSync('node', [main, 'up', '-n', String(agents), '--driver', 'echo', '--state-dir', dir, '-d'], { stdio: 'ignore' });
  try {
    const hub = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { control: { host: string; port: number }; token?: string };
    const token = hub.token ?? fs.readFileSync(path.join(dir, 'token'), 'utf8').trim();
    const api = async (m: string, p: string, body?: unknown) => (await (await fetch(`http://${hub.control.host}:${hub.control.port}${p}`, { method: m, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: body === undefined ? undefined : JSON.stringify(body) })).json()) as { tasks: { done: number; failed: number } };
    const t0 = Date.now();
    await api('POST', '/tasks', { tasks: Array.from({ length: tasks }, (_, i) => ({ prompt: `task ${i}` })) });
    for (;;) {
      const s = await api('GET', '/status');
      if (s.tasks.done + s.tasks.failed >= tasks) break;
      if (Date.now() - t0 > 600_000) throw new Error('swarm: not done in 600 s');
      await sleep(50);
    }
    return Date.now() - t0;
  } finally {
    execFileSync('node', [main, 'down', '--state-dir', dir], { stdio: 'ignore' });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const s = await swarm();
const m = await mittelo();
console.log(JSON.stringify({ tasks, agents, swarm_ms: s, mittelo_ms: m, ratio: Number((m / s).toFixed(1)), load: os.loadavg().map((x) => x.toFixed(1)) }));
