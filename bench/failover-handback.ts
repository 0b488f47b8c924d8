/**
 * Failover handback cost against the hub's history. Real processes: `swarm hub` and one
 * `swarm worker --failover --count N` process (echo driver), on one state dir for the whole bench.
 *   npx tsc -p . && node dist/bench/failover-handback.js [--history 500,5000,10000] [--workers 25] [--tasks 500]
 *     [--latency-ms 20] [--kill-after-ms 300] [--label after] [--out bench/results/failover-handback.jsonl]
 * For each history length H (cumulative, in order): tasks run in star mode until the hub has H tasks
 * final; then a run of `tasks` is submitted, the hub is killed (SIGKILL) `kill-after-ms` later, the
 * workers finish that run in gossip mode, and the hub is restarted on the same state dir. Measured:
 * reconcile = the restarted hub is up (hub.json names it) -> every worker back in star mode; also
 * -> the hub has every task final. The hub's handback counters (/status `failover`) say how much was
 * offered and sent. Lost and duplicated results of the run are counted in the journal. Each line
 * carries the load average (1 min) at the start and the end of the reconcile.
 * Hub heartbeats 250 ms and `--hub-lapse-ms 1500`, as test/failover/failover-kill20.test.ts, to shorten detection.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, arg, checkArgs } from './args.js';
import { agents, api, bg, hubFile, kill, killAll, tally } from './failover-procs.js';
import { cpuSeconds } from './proc.js';

const HISTORY = arg('history', '500,5000,10000').split(',').map(Number);
const WORKERS = Number(arg('workers', '25'));
const TASKS = Number(arg('tasks', '500'));
const LATENCY = Number(arg('latency-ms', '20'));
const KILL_AFTER = Number(arg('kill-after-ms', '300'));
const LABEL = arg('label', 'run');
const OUT = arg('out', path.join(ROOT, 'bench/results/failover-handback.jsonl'));
checkArgs('failover-handback', "Failover handback cost against the hub's history: swarm hub and one swarm worker --failover --count N (echo driver) on one state dir.");

const emit = (o: Record<string, unknown>) => {
  const line = JSON.stringify({ bench: 'failover-handback', label: LABEL, at: new Date().toISOString(), ...o });
  process.stdout.write(line + '\n');
  fs.appendFileSync(OUT, line + '\n');
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean | Promise<boolean>, ms: number, every = 20): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (await cond()) return true; await sleep(every); }
  return cond();
}
const round2 = (x: number) => Math.round(x * 100) / 100;
const load = () => round2(os.loadavg()[0]!);
const cpu = (pid: number | undefined) => { try { return pid ? cpuSeconds(pid) : NaN; } catch { return NaN; } };

type Status = { tasks: { done: number; failed: number }; failover?: { workers: unknown[]; [k: string]: unknown } };
const final = async (dir: string) => { const s = await api<Status>(dir, 'GET', '/status'); return s ? s.tasks.done + s.tasks.failed : -1; };

/**
 * Fixed ports below the ephemeral range (32768+): a restarted hub reuses its port, and a port-0 port
 * up there can meanwhile be taken by an outgoing connection (the workers' reconnects among them).
 */
const PORT = 20_000 + Math.floor(Math.random() * 12_000);

async function startHub(dir: string): Promise<ChildProcess> {
  const before = hubFile(dir)?.pid;
  const c = bg(['hub', '--state-dir', dir, '--port', String(PORT), '--control-port', String(PORT + 1), '--heartbeat-ms', '250',
    '--log-file', path.join(dir, 'hub.log')], path.join(dir, 'hub.err'));
  if (!(await until(() => { const h = hubFile(dir); return !!h && h.pid !== before && h.pid === c.pid; }, 30_000, 20))) {
    throw new Error(`hub did not start (${dir}): ${fs.readFileSync(path.join(dir, 'hub.err'), 'utf8').slice(-1500)}`);
  }
  return c;
}

async function submit(dir: string, prefix: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`);
  for (let i = 0; i < n; i += 2000) {
    const r = await api<{ accepted?: unknown[] }>(dir, 'POST', '/tasks', { tasks: ids.slice(i, i + 2000).map((id) => ({ id, prompt: `task ${id}` })) });
    if (!Array.isArray(r?.accepted)) throw new Error(`submit failed: ${JSON.stringify(r).slice(0, 300)}`);
  }
  return ids;
}

/**
 * From the workers' log, lines at or after `since`: per agent, when it entered `reconciling` (it
 * reconnected to the hub) and when it was back in star mode (its handback acknowledged). Splits the
 * reconcile into the reconnect (client backoff, up to 2 s) and the handback proper.
 */
function phases(dir: string, since: number, up: number): Record<string, unknown> {
  const rec = new Map<string, number>(), star = new Map<string, number>();
  const offerMs: number[] = [], sendMs: number[] = [];
  for (const l of fs.readFileSync(path.join(dir, 'w.log'), 'utf8').split('\n')) {
    if (!l.includes('reconciling') && !l.includes('handed back')) continue;
    try {
      const r = JSON.parse(l) as { time: number; worker?: string; msg: string; mode?: string; offer_ms?: number; send_ms?: number };
      if (r.time < since || !r.worker) continue;
      if (r.msg === 'failover mode' && r.mode === 'reconciling' && !rec.has(r.worker)) rec.set(r.worker, r.time);
      if (r.msg.startsWith('handed back') && !star.has(r.worker)) {
        star.set(r.worker, r.time);
        if (r.offer_ms !== undefined) offerMs.push(r.offer_ms);
        if (r.send_ms !== undefined) sendMs.push(r.send_ms);
      }
    } catch { /* torn */ }
  }
  const hb = [...star].filter(([w]) => rec.has(w)).map(([w, at]) => at - rec.get(w)!).sort((a, b) => a - b);
  const re = [...rec.values()].map((at) => at - up).sort((a, b) => a - b);
  return {
    agents_logged: hb.length,
    reconnect_ms: { first: re[0] ?? null, last: re[re.length - 1] ?? null },
    handback_ms: { p50: hb[Math.floor(hb.length / 2)] ?? null, max: hb[hb.length - 1] ?? null },
    // Ids-first only (the workers log these since): the offer round trips, then the wanted entries'.
    ...(offerMs.length ? { offer_ms: med(offerMs), send_ms: med(sendMs) } : {}),
  };
}

function med(xs: number[]): { p50: number; max: number } {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length / 2)]!, max: s[s.length - 1]! };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-handback-'));
  let hub = await startHub(dir);
  const worker = bg(['worker', '--state-dir', dir, '--count', String(WORKERS), '--id', 'w', '--failover', '--driver', 'echo', '--driver-opt', `latency_ms=${LATENCY}`,
    '--hub-lapse-ms', '1500', '--log-file', path.join(dir, 'w.log')]);
  if (!(await until(async () => (await api<Status>(dir, 'GET', '/status'))?.failover?.workers.length === WORKERS, 60_000, 100))) throw new Error('workers did not join');
  let total = 0;
  for (const [round, h] of HISTORY.entries()) {
    // Star-mode history up to h tasks final at the hub.
    if (h > total) {
      await submit(dir, `h${round}`, h - total);
      total = h;
      if (!(await until(async () => (await final(dir)) >= total, 600_000, 100))) throw new Error(`history ${h} did not finish`);
    }
    await sleep(1000);
    const ids = await submit(dir, `r${round}`, TASKS);
    total += TASKS;
    await sleep(KILL_AFTER);
    kill(hub);
    const killedAt = Date.now();
    const gossip = await until(() => { const a = agents(dir); return a.length === WORKERS && a.every((x) => x.mode === 'gossip'); }, 30_000, 20);
    const finished = await until(() => agents(dir).some((a) => a.coordinating && a.replica.done + a.replica.failed >= total), 120_000, 50);
    const finishedMs = Date.now() - killedAt;
    await sleep(500);
    const load0 = load();
    const cpu0 = cpu(worker.pid);
    const t0 = Date.now();
    hub = await startHub(dir);
    const up = Date.now();
    const star = await until(() => { const a = agents(dir); return a.length === WORKERS && a.every((x) => x.mode === 'star'); }, 120_000, 20);
    const starAt = Date.now();
    // CPU used from the restart until every worker is in star mode: the new hub's, the worker process's (all agents).
    const cpuHub = cpu(hub.pid), cpuWorker = cpu(worker.pid) - cpu0;
    const recorded = await until(async () => (await final(dir)) >= total, 60_000, 20);
    const doneAt = Date.now();
    const load1 = load();
    await sleep(3500);
    const st = await api<Status>(dir, 'GET', '/status');
    const fo = { ...(st?.failover ?? {}) } as Record<string, unknown>;
    delete fo.workers; delete fo.holders;
    emit({
      kind: 'trial', history: h, tasks_before_kill: total - TASKS, tasks_total: total, workers: WORKERS, latency_ms: LATENCY, kill_after_ms: KILL_AFTER,
      gossip, finished_ms: finishedMs, hub_start_ms: up - t0, reconcile_ms: star ? starAt - up : null, hub_final_ms: recorded ? doneAt - up : null,
      ...phases(dir, t0, up), cpu_s: { hub: round2(cpuHub), worker: round2(cpuWorker) }, loadavg_start: load0, loadavg_end: load1, hub_failover: fo, ...tally(dir, ids),
    });
  }
  killAll();
  await sleep(300);
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}

main().catch((err) => { process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`); process.exit(1); });
