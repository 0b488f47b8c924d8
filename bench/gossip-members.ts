/**
 * The members' memory in gossip mode: `swarm up --agents 25 --procs 5 --driver echo` (failover on),
 * --hot tasks of 100 B-16 KB run in star mode (the hot state), then --tail more are submitted and the
 * hub is killed (`kill -9`) --kill-after-ms later; the workers finish the tail in gossip mode. Once every
 * agent is in gossip mode and the acting coordinator has every task final, and again --settle-s later,
 * it prints each worker process's RSS, the agents' replica sizes (those that hold the state and the
 * others), and the load average. Runs against any build (it reads the status files and /proc only),
 * so the same file measures a before and an after: copy dist/bench/gossip-members.js into the other
 * build's dist/bench and run it there.
 *
 * Run: `npm run build && node dist/bench/gossip-members.js [--hot 20000] [--tail 2000] [--settle-s 20]`.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, arg, checkArgs } from './args.js';
import { agents, api, hubFile, type FailoverAgent } from './failover-procs.js';
import { rssMb } from './proc.js';
import { soakPrompt } from './soak-prompt.js';

const HOT = Number(arg('hot', '20000', 'tasks run in star mode first (the hot state)'));
const TAIL = Number(arg('tail', '2000', 'tasks submitted just before the hub is killed, run in gossip mode'));
const KILL_AFTER = Number(arg('kill-after-ms', '300', 'ms from the tail\'s submit to the kill'));
const SETTLE = Number(arg('settle-s', '20', 'seconds in gossip mode after the run ended, before the second reading'));
checkArgs('gossip-members', "The members' memory in gossip mode: RSS per worker process and replica sizes after a hub kill.");

const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Agent = FailoverAgent & { holds_state?: boolean };

function workerPids(dir: string): number[] {
  const d = path.join(dir, 'pids');
  return [...new Set(fs.readdirSync(d).map((f) => { const t = fs.readFileSync(path.join(d, f), 'utf8').trim(); return t.startsWith('{') ? (JSON.parse(t) as { pid: number }).pid : Number(t); }))];
}

async function submit(dir: string, from: number, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let a = from; a < from + n; a += 500) {
    const tasks = Array.from({ length: Math.min(500, from + n - a) }, (_, j) => ({ id: `gm-${a + j}`, prompt: soakPrompt(a + j) }));
    for (;;) { const r = await api<{ error?: unknown }>(dir, 'POST', '/tasks', { tasks }); if (r && !r.error) break; await sleep(250); }
    ids.push(...tasks.map((t) => t.id));
  }
  return ids;
}

function reading(dir: string, pids: number[], total: number): Record<string, unknown> {
  const as = agents(dir) as Agent[];
  const pulls = as.filter((a) => a.holds_state ?? true);
  const rest = as.filter((a) => !(a.holds_state ?? true));
  const sizes = (xs: Agent[]) => xs.map((a) => a.replica.size);
  const rss = pids.map((p) => { try { return Math.round(rssMb(p)); } catch { return 0; } });
  return {
    load: +os.loadavg()[0]!.toFixed(1), worker_rss_mb: rss, worker_rss_total_mb: rss.reduce((x, y) => x + y, 0),
    agents: as.length, coordinator_done: as.find((a) => a.coordinating)?.replica.done, total,
    holding: pulls.map((a) => a.id).join(' '), holding_sizes: sizes(pulls), others_sizes: sizes(rest),
    entries_total: as.reduce((x, a) => x + a.replica.size, 0),
  };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-gossip-members-'));
  const up = spawnSync(process.execPath, [CLI, 'up', '--agents', '25', '--procs', '5', '--driver', 'echo', '--detach', '--json', '--ready-timeout', '120000', '--state-dir', dir], { encoding: 'utf8', timeout: 150_000 });
  if (up.status !== 0) throw new Error(`up failed: ${up.stdout}${up.stderr}`);
  try {
    const hot = await submit(dir, 0, HOT);
    for (;;) { const r = await api<{ complete?: boolean }>(dir, 'POST', '/wait', { ids: hot.slice(-500), timeout_ms: 20_000 }); if (r?.complete) break; }
    log(`${HOT} hot tasks done`);
    const pids = workerPids(dir);
    const star = reading(dir, pids, HOT + TAIL);
    log(`star mode: ${JSON.stringify(star)}`);
    await submit(dir, HOT, TAIL);
    await sleep(KILL_AFTER);
    process.kill(hubFile(dir)!.pid, 'SIGKILL');
    const killed = Date.now();
    log('hub killed');
    const ended = async () => { const as = agents(dir); return as.length > 0 && as.every((a) => a.mode === 'gossip') && (as.find((a) => a.coordinating)?.replica.done ?? 0) >= HOT + TAIL; };
    while (!(await ended()) && Date.now() - killed < 180_000) await sleep(250);
    const end = { after_kill_s: Math.round((Date.now() - killed) / 100) / 10, ...reading(dir, pids, HOT + TAIL) };
    log(`run ended in gossip mode: ${JSON.stringify(end)}`);
    await sleep(SETTLE * 1000);
    const settled = { after_kill_s: Math.round((Date.now() - killed) / 100) / 10, ...reading(dir, pids, HOT + TAIL) };
    log(`${SETTLE} s later: ${JSON.stringify(settled)}`);
    console.log(JSON.stringify({ date: new Date().toISOString(), command: `node dist/bench/gossip-members.js ${process.argv.slice(2).join(' ')}`.trim(), star, end, settled }));
  } finally {
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { encoding: 'utf8', timeout: 60_000 });
    for (const p of (() => { try { return workerPids(dir); } catch { return []; } })()) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`); process.exit(1); });
