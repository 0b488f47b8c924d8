/**
 * What failover costs when nothing fails: `swarm up --agents N --driver echo` with and
 * without failover, M tasks submitted at once and waited for, alternating the two modes so both
 * see the same background load.
 *   npx tsc -p . && node dist/bench/failover-overhead.js [--agents 25] [--tasks 1000] [--rounds 5] [--latency-ms 0]
 *     [--warm 0] [--idle-s 0] [--codec msgpack|ndjson] [--label text] [--out file]
 * Prints one JSON line per run (completion ms, tasks/s, the hub's dispatch p50/p99, CPU ms of the hub
 * and of the workers during the run, duplicate results, workers not in star mode, load average) and
 * a summary with the medians per mode and the ratios failover / no failover.
 * `--warm N` first runs N tasks (not measured), so the measured run sees warm processes (JIT-compiled
 * code) as a long-lived swarm does; without it the measured run is the first after `swarm up`.
 * `--idle-s S` also measures the CPU of the idle swarm over S seconds (before any task).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, ROOT, arg, checkArgs } from './args.js';

const AGENTS = Number(arg('agents', '25'));
const TASKS = Number(arg('tasks', '1000'));
const ROUNDS = Number(arg('rounds', '5'));
const LATENCY = Number(arg('latency-ms', '0'));
const OUT = arg('out', '');
const WARM = Number(arg('warm', '0'));
const IDLE_S = Number(arg('idle-s', '0'));
const LABEL = arg('label', '');
/** `msgpack`: hub and workers speak msgpack (`swarm up --msgpack`); NDJSON is the default codec. */
const CODEC = arg('codec', 'ndjson');
checkArgs('failover-overhead', 'What failover costs when nothing fails: swarm up --agents N --driver echo with and without failover, alternating.');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length ? (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2 : NaN; };
const emit = (o: unknown) => {
  const line = JSON.stringify(o);
  process.stdout.write(line + '\n');
  if (OUT) fs.appendFileSync(OUT, line + '\n');
};

/** CPU time (user + system, ms) of a process; 0 once it is gone. */
function cpu(pid: number): number {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // clock ticks of 10 ms (USER_HZ 100)
  } catch { return 0; }
}

/** Pids whose command line names the state dir (the hub and its workers). */
function pidsOf(dir: string): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try { if (fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(dir)) out.push(Number(d)); } catch { /* gone */ }
  }
  return out;
}

interface Status { tasks: { done: number; failed: number }; metrics: { dispatch_p50_ms: number; dispatch_p99_ms: number; duplicate_results: number }; failover?: { workers: { mode: string }[]; holders?: string[] } }

/** `--failover` was opt-in before it became the default (then `--no-failover` turns it off). */
const DEFAULT_ON = spawnSync(process.execPath, [CLI, 'up', '--help'], { encoding: 'utf8' }).stdout.includes('--no-failover');
const modeArgs = (on: boolean) => (DEFAULT_ON ? (on ? [] : ['--no-failover']) : (on ? ['--failover'] : []));

async function run(failover: boolean): Promise<Record<string, unknown>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-fo-overhead-'));
  try {
    const up = spawnSync(process.execPath, [CLI, 'up', '--agents', String(AGENTS), '--driver', 'echo', '--driver-opt', `latency_ms=${LATENCY}`,
      '--detach', '--state-dir', dir, ...modeArgs(failover), ...(CODEC === 'msgpack' ? ['--msgpack'] : [])], { encoding: 'utf8' });
    if (up.status !== 0) throw new Error(`swarm up failed: ${up.stderr}`);
    const h = JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { pid: number; token?: string; control: { host: string; port: number } };
    const base = `http://${h.control.host}:${h.control.port}`;
    const headers = { 'content-type': 'application/json', ...(h.token ? { authorization: `Bearer ${h.token}` } : {}) };
    const status = async () => (await (await fetch(`${base}/status`, { headers })).json()) as Status;
    await sleep(2000); // let joins and first syncs settle
    const pids = pidsOf(dir);
    const idle: Record<string, number> = {};
    if (IDLE_S > 0) {
      const i0 = new Map(pids.map((p) => [p, cpu(p)]));
      await sleep(IDLE_S * 1000);
      const hub = cpu(h.pid) - (i0.get(h.pid) ?? 0);
      const workers = pids.reduce((a, p) => a + cpu(p) - (i0.get(p) ?? 0), 0) - hub;
      Object.assign(idle, { idle_s: IDLE_S, idle_hub_ms_per_s: round(hub / IDLE_S), idle_workers_ms_per_s: round(workers / IDLE_S), idle_per_worker_ms_per_s: round(workers / IDLE_S / AGENTS) });
    }
    const batch = async (prefix: string, n: number, before: number) => {
      const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
      const res = await fetch(`${base}/tasks`, { method: 'POST', headers, body: JSON.stringify({ tasks: ids.map((id) => ({ id, prompt: `task ${id}` })) }) });
      if (res.status !== 202) throw new Error(`submit: ${res.status} ${await res.text()}`);
      const until = Date.now() + 600_000;
      while (Date.now() < until) {
        const s = await status();
        if (s.tasks.done + s.tasks.failed >= before + n) return;
        await sleep(20);
      }
      throw new Error('run did not finish in 10 minutes');
    };
    if (WARM > 0) { await batch('warm', WARM, 0); await sleep(1500); }
    const c0 = new Map(pids.map((p) => [p, cpu(p)]));
    const t0 = performance.now();
    await batch('t', TASKS, WARM);
    const ms = performance.now() - t0;
    const hubCpu = cpu(h.pid) - (c0.get(h.pid) ?? 0);
    const allCpu = pids.reduce((a, p) => a + cpu(p) - (c0.get(p) ?? 0), 0);
    await sleep(1000); // a late duplicate would land now
    const s = await status();
    return {
      ...(LABEL ? { label: LABEL } : {}), failover, codec: CODEC, agents: AGENTS, tasks: TASKS, warm: WARM, latency_ms: LATENCY, ms: Math.round(ms), tasks_per_s: Math.round(TASKS / (ms / 1000)),
      dispatch_p50_ms: round(s.metrics.dispatch_p50_ms), dispatch_p99_ms: round(s.metrics.dispatch_p99_ms),
      hub_cpu_ms: hubCpu, workers_cpu_ms: allCpu - hubCpu, duplicate_results: s.metrics.duplicate_results,
      not_star: s.failover?.workers.filter((w) => w.mode !== 'star').length ?? 0, holders: s.failover?.holders?.length,
      load1: round(os.loadavg()[0]!), cores: os.cpus().length, ...idle,
    };
  } finally {
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir], { encoding: 'utf8' });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function round(x: number): number { return Math.round(x * 100) / 100; }

const rows: Record<string, unknown>[] = [];
for (let r = 0; r < ROUNDS; r++) {
  for (const fo of r % 2 ? [true, false] : [false, true]) {
    const row = await run(fo);
    rows.push(row);
    emit({ kind: 'run', round: r, ...row });
  }
}
const pick = (fo: boolean, k: string) => median(rows.filter((x) => x.failover === fo).map((x) => Number(x[k])));
const keys = ['ms', 'tasks_per_s', 'dispatch_p50_ms', 'dispatch_p99_ms', 'hub_cpu_ms', 'workers_cpu_ms', 'load1', ...(IDLE_S > 0 ? ['idle_per_worker_ms_per_s', 'idle_hub_ms_per_s'] : [])];
const off = Object.fromEntries(keys.map((k) => [k, pick(false, k)]));
const on = Object.fromEntries(keys.map((k) => [k, pick(true, k)]));
emit({
  kind: 'summary', ...(LABEL ? { label: LABEL } : {}), codec: CODEC, agents: AGENTS, tasks: TASKS, warm: WARM, rounds: ROUNDS, latency_ms: LATENCY, median_no_failover: off, median_failover: on,
  ratio: {
    ms: round(on.ms! / off.ms!), tasks_per_s: round(on.tasks_per_s! / off.tasks_per_s!), dispatch_p99_ms: round(on.dispatch_p99_ms! / off.dispatch_p99_ms!),
    hub_cpu_ms: round(on.hub_cpu_ms! / off.hub_cpu_ms!), workers_cpu_ms: round(on.workers_cpu_ms! / off.workers_cpu_ms!),
  },
  duplicate_results: rows.reduce((a, x) => a + Number(x.duplicate_results), 0), not_star: rows.reduce((a, x) => a + Number(x.not_star), 0),
});
