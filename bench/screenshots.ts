/**
 * The README's dashboard screenshots, made from a real swarm: `swarm up --agents 25` (echo driver,
 * slow enough to watch), bursts of tasks for the queue chart, one role changed, one worker killed
 * (and respawned), a finished diamond-debate, a cancelled one and a running one, then headless chromium on the page
 * `swarm dashboard` prints. `swarm top` is drawn by its own `screen()` into a terminal-like page.
 * Writes docs/img/dashboard.png, dashboard-node.png, top.png (each under 200 KB with pngquant).
 * Run: `npm run screenshots` (needs chromium: apt-get install chromium, or SWARM_CHROMIUM; and pngquant).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { screen } from '../cli/commands/top.js';
import type { DashState } from '../hub/dashboard/types.js';
import { CLI, ROOT, arg, checkArgs } from './args.js';

const OUT = arg('out', path.join(ROOT, 'docs/img'));
checkArgs('screenshots', "The README's dashboard screenshots, made from a real swarm and headless chromium.");
const CHROMIUM = process.env.SWARM_CHROMIUM ?? '/usr/bin/chromium';
const MAX_BYTES = 200 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface HubFile { pid: number; control: { host: string; port: number }; token?: string }

function cli(args: string[], timeoutMs = 180_000): string {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: timeoutMs });
  if (r.status !== 0) throw new Error(`swarm ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function api<T>(hub: HubFile, method: string, p: string, body?: unknown): Promise<T> {
  const res = await fetch(`http://${hub.control.host}:${hub.control.port}${p}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(hub.token ? { authorization: `Bearer ${hub.token}` } : {}) },
  });
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
  return res.json() as Promise<T>;
}

const debate = (name: string, tokens: number) => ({
  experiment: {
    name, topology: 'diamond-debate', inputs: { text: 'How should the little bird get home before the rain?' },
    debate: { stances: ['fast', 'careful', 'cheap'] }, limits: { rounds: 2, turns: 16, max_tokens: tokens },
  },
});

async function main(): Promise<void> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no chromium at ${CHROMIUM} (apt-get install chromium, or set SWARM_CHROMIUM)`);
  fs.mkdirSync(OUT, { recursive: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-shots-'));
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  try {
    cli(['up', '--agents', '25', '--driver', 'echo', '--driver-opt', 'token_ms=120', '-d', '--state-dir', dir, '--json']);
    const hub = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as HubFile;
    const { url } = JSON.parse(cli(['dashboard', '--state-dir', dir, '--no-open', '--json'])) as { url: string };
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(url);
    await page.waitForFunction(() => document.querySelectorAll('#workers tbody tr[data-worker]').length === 25, undefined, { timeout: 60_000 });

    // A finished debate first (short answers), for the report link; roles for two workers.
    const done = await api<{ run: string }>(hub, 'POST', '/runs', debate('bird-debate-short', 8));
    await api(hub, 'POST', '/workers/w-7/role', { role: 'critic' });
    await api(hub, 'POST', '/workers/w-12/role', { role: 'judge' });
    // Bursts of tasks: the chart gets a shape (queued climbs and drains, done steps up).
    const words = 'the little bird flies home before the rain comes down on the hill and the wind';
    for (let burst = 0; burst < 4; burst++) {
      await api(hub, 'POST', '/tasks', { tasks: Array.from({ length: 40 + burst * 25 }, (_, i) => ({ prompt: `${words} ${burst}-${i}` })) });
      await sleep(6000);
    }
    await page.locator(`.run[data-run="${done.run}"] a.report`).waitFor({ timeout: 120_000 });
    // A worker killed a few seconds before the picture: shown dead, then respawned.
    const status = await api<{ workers: { id: string; pid: number }[] }>(hub, 'GET', '/status');
    process.kill(status.workers.find((w) => w.id === 'w-19')!.pid, 'SIGKILL');
    await page.locator('tr[data-worker="w-19"][data-respawns="1"]:not([data-state="dead"])').waitFor({ timeout: 60_000 });
    // A debate cancelled once its proposer is done: its nodes show cancelled.
    const stopped = await api<{ run: string }>(hub, 'POST', '/runs', debate('bird-debate-stopped', 40));
    await page.locator(`.run[data-run="${stopped.run}"] g.node[data-node="debate/propose"][data-state="done"]`).waitFor({ timeout: 60_000 });
    await api(hub, 'POST', `/runs/${stopped.run}/cancel`, { reason: 'stopped by the operator' });
    // The running debate: shoot once some of its nodes are done and some running.
    const live = await api<{ run: string }>(hub, 'POST', '/runs', debate('bird-debate', 40));
    await api(hub, 'POST', '/tasks', { tasks: Array.from({ length: 30 }, (_, i) => ({ prompt: `${words} last-${i}` })) });
    const card = `.run[data-run="${live.run}"]`;
    await page.waitForFunction((c) => {
      const states = [...document.querySelectorAll(`${c} g.node`)].map((n) => (n as HTMLElement).dataset.state);
      return states.includes('done') && states.includes('running') && states.length >= 4;
    }, card, { timeout: 120_000 });
    await sleep(1500);
    await page.evaluate(() => window.scrollTo(0, 0));
    await shoot(page, 'dashboard.png', { fullPage: true });

    // One click on a running node: its rendered prompt and its output as it streams.
    await page.locator(`${card} g.node[data-state="running"]`).first().click();
    await page.locator('#d-output').filter({ hasText: /\S/ }).waitFor({ timeout: 60_000 });
    await sleep(700); // a few more words in, still streaming
    await shoot(page, 'dashboard-node.png', {});

    // `swarm top`: its own drawing of the same stream, in a terminal-sized page.
    const state = await page.evaluate(async () => {
      const r = await fetch('/dashboard/state');
      return r.json();
    }) as DashState;
    const text = screen(state, 120, 40).join('\n');
    const term = await browser.newPage({ viewport: { width: 1000, height: 620 } });
    const esc = (s: string) => s.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]!);
    await term.setContent(`<body style="margin:0;background:#1e1e1e"><pre style="margin:0;padding:10px 12px;color:#d4d4d4;font:13px/1.3 'DejaVu Sans Mono',monospace">${esc(text)}</pre></body>`);
    await shoot(term, 'top.png', {});
  } finally {
    await browser.close();
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { timeout: 60_000 });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A PNG, through pngquant (Debian's `pngquant`) when it is installed: a flat page needs few colours. */
async function shoot(page: import('playwright-core').Page, name: string, o: { fullPage?: boolean }): Promise<void> {
  const file = path.join(OUT, name);
  await page.screenshot({ path: file, fullPage: o.fullPage ?? false });
  const q = spawnSync('pngquant', ['--quality', '65-90', '--speed', '1', '--strip', '--force', '--output', file, file]);
  const kb = Math.round(fs.statSync(file).size / 1024);
  process.stdout.write(`${file}: ${kb} KB${q.error ? ' (no pngquant: apt-get install pngquant)' : ''}\n`);
  if (kb * 1024 > MAX_BYTES) process.stderr.write(`warning: ${name} is over ${MAX_BYTES / 1024} KB\n`);
}

main().catch((err: unknown) => { process.stderr.write(`${(err as Error).stack ?? String(err)}\n`); process.exit(1); });
