/**
 * What open dashboards cost the hub: `swarm up --agents 25 --driver echo` (real processes), tasks
 * submitted at a fixed rate the whole time (streamed word by word), and the hub process's CPU time
 * (/proc/PID/stat) over equal phases with no dashboard and with N open ones: N SSE clients that read
 * and apply every message (as `swarm top` does) plus, with --browser 1, one headless chromium on the
 * page. Phases alternate (none, open, none, open, …) so drift in the load falls on both; the
 * baseline is the same swarm, same load, no dashboard. Reported: the difference as % of one core.
 * Run: `npm run build && node dist/bench/dashboard.js [--agents 25] [--clients 10] [--rate 40]
 * [--phase-s 20] [--rounds 2] [--browser 1] [--out bench/results/dashboard.jsonl]`.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { SseParser, applyEvent } from '../cli/events.js';
import type { DashState } from '../hub/dashboard/types.js';
import { CLI, ROOT, arg, checkArgs } from './args.js';
import { cpuSeconds, machine } from './proc.js';

const AGENTS = Number(arg('agents', '25'));
const CLIENTS = Number(arg('clients', '10'));
const RATE = Number(arg('rate', '40'));
const PHASE_S = Number(arg('phase-s', '20'));
const ROUNDS = Number(arg('rounds', '2'));
const BROWSER = arg('browser', '1') === '1';
const OUT = arg('out', path.join(ROOT, 'bench/results/dashboard.jsonl'));
checkArgs('dashboard', "What open dashboards cost the hub: swarm up --agents N --driver echo, tasks at a fixed rate, the hub's CPU with no dashboard and with N open ones.");
const CHROMIUM = process.env.SWARM_CHROMIUM ?? '/usr/bin/chromium';
const PROMPT = 'the little bird flies home before the rain comes down on the hill';

interface Hub { pid: number; control: { host: string; port: number }; token?: string }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load1 = () => +os.loadavg()[0]!.toFixed(2);
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function call(hub: Hub, method: string, p: string, body?: unknown): Promise<unknown> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: hub.control.host, port: hub.control.port, method, path: p, agent, timeout: 30_000,
      headers: { 'content-type': 'application/json', ...(hub.token ? { authorization: `Bearer ${hub.token}` } : {}) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => (res.statusCode! < 300 ? resolve(text ? JSON.parse(text) : {}) : reject(new Error(`${method} ${p}: ${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** One dashboard's event stream, read and applied like `swarm top` does. */
function sseClient(hub: Hub, counts: { messages: number; bytes: number; workers: number }): { close(): void } {
  let state: DashState | undefined;
  const req = http.get({
    host: hub.control.host, port: hub.control.port, path: '/dashboard/events',
    headers: { accept: 'text/event-stream', ...(hub.token ? { authorization: `Bearer ${hub.token}` } : {}) },
  }, (res) => {
    res.setEncoding('utf8');
    const p = new SseParser((e) => { state = applyEvent(state, e); counts.messages++; counts.workers = state?.workers.length ?? 0; });
    res.on('data', (c: string) => { counts.bytes += c.length; p.push(c); });
  });
  req.on('error', () => { /* closed by us */ });
  return { close: () => req.destroy() };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-dash-'));
  const up = spawnSync(process.execPath, [CLI, 'up', '--agents', String(AGENTS), '--driver', 'echo', '--driver-opt', 'token_ms=20', '-d', '--state-dir', dir, '--json'], { encoding: 'utf8', timeout: 180_000 });
  if (up.status !== 0) throw new Error(`swarm up failed: ${up.stderr}`);
  const hub = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as Hub;
  const browser = BROWSER && fs.existsSync(CHROMIUM)
    ? await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
    : undefined;
  // The load: RATE tasks a second in batches every 100 ms, for as long as the phases last (bounded).
  let submitted = 0, stopLoad = false;
  const maxTasks = RATE * (ROUNDS * 2 * (PHASE_S + 4) + 30);
  const loader = (async () => {
    const per = Math.max(1, Math.round(RATE / 10));
    while (!stopLoad && submitted < maxTasks) {
      const t0 = Date.now();
      await call(hub, 'POST', '/tasks', { tasks: Array.from({ length: per }, (_, i) => ({ prompt: `${PROMPT} ${submitted + i}` })) });
      submitted += per;
      await sleep(Math.max(0, 100 - (Date.now() - t0)));
    }
  })();
  const done = async () => ((await call(hub, 'GET', '/status')) as { tasks: { done: number } }).tasks.done;
  const rows: Record<string, unknown>[] = [];
  try {
    await sleep(5000); // warm up: every worker busy, JIT settled
    for (let round = 0; round < ROUNDS; round++) {
      for (const open of [0, CLIENTS]) {
        const counts = { messages: 0, bytes: 0, workers: 0 };
        const clients = Array.from({ length: open }, () => sseClient(hub, counts));
        let page: import('playwright-core').Page | undefined;
        if (open && browser) {
          const t = (await call(hub, 'POST', '/dashboard/ticket')) as { path: string };
          page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
          await page.goto(`http://${hub.control.host}:${hub.control.port}${t.path}`);
        }
        await sleep(2000); // connected, snapshots sent: the steady state is what is measured
        const [cpu0, done0, t0, l0] = [cpuSeconds(hub.pid), await done(), Date.now(), load1()];
        const m0 = counts.messages;
        await sleep(PHASE_S * 1000);
        const [cpu1, done1, t1] = [cpuSeconds(hub.pid), await done(), Date.now()];
        const shownWorkers = page ? await page.locator('#workers tbody tr[data-worker]').count() : undefined;
        for (const c of clients) c.close();
        await page?.close();
        const secs = (t1 - t0) / 1000;
        const row = {
          round, dashboards: open, browser: Boolean(page), hub_cpu_pct: +((100 * (cpu1 - cpu0)) / secs).toFixed(2),
          tasks_per_s: +((done1 - done0) / secs).toFixed(1), sse_messages_per_s_per_client: open ? +((counts.messages - m0) / secs / open).toFixed(2) : 0,
          sse_kb_total: +(counts.bytes / 1024).toFixed(1), workers_seen: counts.workers, ...(shownWorkers !== undefined ? { page_workers: shownWorkers } : {}),
          load1_start: l0, load1_end: load1(),
        };
        rows.push(row);
        process.stdout.write(JSON.stringify(row) + '\n');
        await sleep(2000); // closed: the next phase starts from no dashboard
      }
    }
  } finally {
    stopLoad = true;
    await loader.catch(() => {});
    await browser?.close();
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { timeout: 60_000 });
    fs.rmSync(dir, { recursive: true, force: true });
    agent.destroy();
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const base = mean(rows.filter((r) => r.dashboards === 0).map((r) => r.hub_cpu_pct as number));
  const withDash = mean(rows.filter((r) => r.dashboards !== 0).map((r) => r.hub_cpu_pct as number));
  const summary = {
    bench: 'dashboard', date: new Date().toISOString(), machine: machine(), agents: AGENTS, clients: CLIENTS, browser: Boolean(browser),
    rate_tasks_per_s: RATE, phase_s: PHASE_S, rounds: ROUNDS, hub_cpu_pct_none: +base.toFixed(2), hub_cpu_pct_open: +withDash.toFixed(2),
    cost_pct_of_core: +(withDash - base).toFixed(2), target_pct: 5, phases: rows,
  };
  process.stdout.write(`${CLIENTS} dashboards${browser ? ' + 1 chromium page' : ''}: hub ${withDash.toFixed(2)}% of a core vs ${base.toFixed(2)}% with none (same swarm, same load): +${(withDash - base).toFixed(2)}% of a core\n`);
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.appendFileSync(OUT, JSON.stringify(summary) + '\n');
}

main().catch((err: unknown) => { process.stderr.write(`${(err as Error).stack ?? String(err)}\n`); process.exit(1); });
