/**
 * What a task costs outside llama.cpp: the hand-off of each task and its text from hub to worker to
 * the batched engine and back. `swarm up --agents N --engine batched` on MODEL, a warm-up, then TASKS
 * short generations (TOKENS each, no one watching), and per process (hub, worker processes, engine):
 * CPU per task (/proc/PID/stat), wake-ups per task (voluntary context switches, the main thread's
 * and all threads'), and the gap each agent sits idle between its tasks: from a task's result
 * (its receipt's `finished_at`) to the next task's first token on the same agent (`started_at` +
 * `ttft_ms`), split into the lease's round trip (to `started_at`) and the rest (to the first token).
 * A bench CPU-light enough for a shared machine: per-task figures hold under load, wall rates do not.
 * `--strace` adds each process's system calls per task by name (strace -f -c over the measured tasks).
 * Appends one line to bench/results/handoff.jsonl (or --out); `--base DIR` runs another build's
 * `swarm` (e.g. main's checkout) first, alternating, so a change and what it replaces meet the same
 * neighbours.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cpuSeconds, machine, quantile } from './proc.js';
import { CLI, ROOT, arg, checkArgs, flag } from './args.js';

const model = arg('model', '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', 'the GGUF');
const agents = Number(arg('agents', '8', 'agents (sequences of the engine)'));
const tasks = Number(arg('tasks', '160', 'tasks measured per round'));
const tokens = Number(arg('tokens', '16', 'max_tokens of each task'));
const rounds = Number(arg('rounds', '1', 'rounds (each build once a round)'));
const warm = Number(arg('warm', '96', 'tasks before measuring (V8 compiles the hot paths)'));
const base = arg('base', '', 'another checkout, built: its swarm runs beside this one');
const extraArg = arg('opts', '', 'more `swarm up` options without their dashes, comma separated, a value after `=` (e.g. no-failover,fsync=interval,driver-opt=threads=1)');
const extra = extraArg ? extraArg.split(',').flatMap((o) => { const i = o.indexOf('='); return i < 0 ? [`--${o}`] : [`--${o.slice(0, i)}`, o.slice(i + 1)]; }) : [];
const outFile = arg('out', path.join(ROOT, 'bench/results/handoff.jsonl'));
const traced = flag('strace', 'count each process\'s system calls per task over the measured tasks (strace -f -c; slows them)');
checkArgs('handoff', 'CPU, wake-ups and idle gap per task outside llama.cpp, through hub, worker and batched engine');

interface Counts { cpu: number; wakes: number; mainWakes: number }
type Kind = 'hub' | 'worker' | 'engine';

function run(cli: string, args: string[], input?: string): string {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, timeout: 900_000, maxBuffer: 256 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`swarm ${args[0]}: ${r.stderr}`);
  return r.stdout;
}

/** Voluntary context switches: of every thread, and of the main thread alone (its event loop). */
function wakes(pid: number): { all: number; main: number } {
  let all = 0, main = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const n = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1] ?? 0);
      all += n;
      if (Number(tid) === pid) main = n;
    } catch { /* thread gone */ }
  }
  return { all, main };
}

/** The swarm's processes by kind: each names the state dir on its command line. */
function processes(dir: string): Map<number, Kind> {
  const out = new Map<number, Kind>();
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
      if (!cmd.join(' ').includes(dir)) continue;
      const kind: Kind | undefined = cmd.some((a) => a.endsWith('host.js')) ? 'engine' : cmd.includes('hub') ? 'hub' : cmd.includes('worker') ? 'worker' : undefined;
      if (kind) out.set(Number(p), kind);
    } catch { /* gone */ }
  }
  return out;
}

function snapshot(procs: Map<number, Kind>): Map<Kind, Counts> {
  const by = new Map<Kind, Counts>();
  for (const [pid, kind] of procs) {
    const c = by.get(kind) ?? { cpu: 0, wakes: 0, mainWakes: 0 };
    try { const w = wakes(pid); c.cpu += cpuSeconds(pid); c.wakes += w.all; c.mainWakes += w.main; } catch { /* gone */ }
    by.set(kind, c);
  }
  return by;
}

interface Receipt { started_at?: number; finished_at?: number; ttft_ms?: number; worker?: string; tokens_out?: number }

/** Each agent's idle time between consecutive tasks (ms): to the next lease, and to its first token. */
function gaps(receipts: Receipt[]): { lease: number[]; firstToken: number[] } {
  const byAgent = new Map<string, Receipt[]>();
  for (const r of receipts) if (r.worker && r.started_at !== undefined && r.finished_at !== undefined) (byAgent.get(r.worker) ?? byAgent.set(r.worker, []).get(r.worker)!).push(r);
  const lease: number[] = [], firstToken: number[] = [];
  for (const rs of byAgent.values()) {
    rs.sort((a, b) => a.started_at! - b.started_at!);
    for (let i = 1; i < rs.length; i++) {
      const prev = rs[i - 1]!, next = rs[i]!;
      lease.push(next.started_at! - prev.finished_at!);
      firstToken.push(next.started_at! + (next.ttft_ms ?? 0) - prev.finished_at!);
    }
  }
  return { lease, firstToken };
}

const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, x) => a + x, 0) / xs.length : NaN);
const r2 = (x: number): number => Math.round(x * 100) / 100;

/** `strace -f -c` on each process while the measured tasks run; `stop()` gives the calls per process kind by name. */
function straceAll(procs: Map<number, Kind>, dir: string): { stop(): Record<string, Record<string, number>> } {
  const runs: { kind: Kind; file: string; child: ChildProcess }[] = [];
  for (const [pid, kind] of procs) {
    const file = path.join(dir, `strace-${pid}.txt`);
    runs.push({ kind, file, child: spawn('strace', ['-f', '-c', '-o', file, '-p', String(pid)], { stdio: 'ignore' }) });
  }
  spawnSync('sleep', ['1']); // attached before the first task
  return {
    stop() {
      for (const r of runs) r.child.kill('SIGINT');
      const out: Record<string, Record<string, number>> = {};
      for (const r of runs) {
        // The summary is written as strace detaches.
        for (let i = 0; i < 50 && !/total/.test(readOr(r.file)); i++) spawnSync('sleep', ['0.1']);
        const by = (out[r.kind] ??= {});
        for (const line of readOr(r.file).split('\n')) {
          const f = line.trim().split(/\s+/);
          // % time, seconds, usecs/call, calls, [errors], syscall
          if (f.length < 5 || !/^\d/.test(f[0]!) || f[f.length - 1] === 'total') continue;
          by[f[f.length - 1]!] = (by[f[f.length - 1]!] ?? 0) + Number(f[3]);
        }
      }
      return out;
    },
  };
}

function readOr(file: string): string { try { return fs.readFileSync(file, 'utf8'); } catch { return ''; } }

/** The engine's own account of the hand-off (host.ts logs it at exit), from its log in the state dir. */
function engineHandoff(dir: string): string | undefined {
  try {
    const logs = path.join(dir, 'engines');
    const text = fs.readdirSync(logs).filter((f) => f.endsWith('.log')).map((f) => fs.readFileSync(path.join(logs, f), 'utf8')).join('\n');
    return /hand-off at exit: (.*)/.exec(text)?.[1]?.trim();
  } catch { return undefined; }
}

function measure(label: string, cli: string): Record<string, unknown> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-handoff-'));
  const row: Record<string, unknown> = { label };
  try {
    run(cli, ['up', '--agents', String(agents), '--engine', 'batched', '--model', model, '--detach', '--json', '--state-dir', dir, '--ready-timeout', '600000', '--driver-opt', 'ctx=512', ...extra]);
    const lines = (tag: string, k: number) => Array.from({ length: k }, (_, i) => JSON.stringify({ id: `${tag}-${i}`, prompt: 'Once upon a time', max_tokens: tokens, temperature: 0, seed: i })).join('\n');
    run(cli, ['submit', '--file', '-', '--wait', '--state-dir', dir], lines('warm', warm));
    const procs = processes(dir);
    const load = os.loadavg();
    const trace = traced ? straceAll(procs, dir) : undefined;
    const a = snapshot(procs);
    const t0 = performance.now();
    const out = run(cli, ['submit', '--file', '-', '--wait', '--json', '--state-dir', dir], lines('run', tasks));
    const wall = (performance.now() - t0) / 1000;
    const b = snapshot(procs);
    if (trace) {
      const calls = trace.stop();
      const n = (JSON.parse(out) as { tasks: { state: string }[] }).tasks.filter((x) => x.state === 'done').length;
      row.syscalls_per_task = Object.fromEntries(Object.entries(calls).map(([k, by]) => [k, Object.fromEntries(Object.entries(by).sort((x, y) => y[1] - x[1]).slice(0, 10).map(([c, v]) => [c, +(v / n).toFixed(2)]))]));
    }
    const res = JSON.parse(out) as { tasks: { state: string; receipt?: Receipt }[] };
    const done = res.tasks.filter((x) => x.state === 'done').length;
    const toks = res.tasks.reduce((s, x) => s + (x.receipt?.tokens_out ?? 0), 0);
    const per: Record<string, unknown> = {};
    let cpuAll = 0;
    for (const kind of ['hub', 'worker', 'engine'] as const) {
      const x = a.get(kind), y = b.get(kind);
      if (!x || !y) continue;
      cpuAll += y.cpu - x.cpu;
      per[kind] = { cpu_ms_per_task: r2((y.cpu - x.cpu) * 1000 / done), wakes_per_task: r2((y.wakes - x.wakes) / done), main_wakes_per_task: r2((y.mainWakes - x.mainWakes) / done) };
    }
    const g = gaps(res.tasks.map((x) => x.receipt ?? {}));
    // Leases into a worker's queue (lease-ahead) and how many came back unstarted, warm-up included.
    const m = (JSON.parse(run(cli, ['status', '--json', '--state-dir', dir])) as { metrics?: { leases_queued?: number; leases_queued_given_back?: number } }).metrics;
    if (m?.leases_queued !== undefined) row.leases_queued = { leased: m.leases_queued, given_back: m.leases_queued_given_back };
    return Object.assign(row, {
      done, tasks, tokens_out: toks, wall_s: r2(wall), tasks_per_s: r2(done / wall), tokens_per_s: Math.round(toks / wall),
      cpu_ms_per_task: r2(cpuAll * 1000 / done), per_process: per,
      gap_ms: { lease_mean: r2(mean(g.lease)), lease_p50: quantile(g.lease, 0.5), lease_p90: quantile(g.lease, 0.9), first_token_mean: r2(mean(g.firstToken)), first_token_p50: quantile(g.firstToken, 0.5), first_token_p90: quantile(g.firstToken, 0.9) },
      load_avg_before: load, load_avg_after: os.loadavg(),
    });
  } finally {
    spawnSync(process.execPath, [cli, 'down', '--state-dir', dir], { timeout: 120_000 });
    // The engine writes its exit lines as it exits, which may be a moment after `down` returns.
    let h = engineHandoff(dir);
    for (let i = 0; i < 50 && !h; i++) { spawnSync('sleep', ['0.2']); h = engineHandoff(dir); }
    if (h) row.engine_handoff_at_exit = h;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (!fs.existsSync(model)) { process.stderr.write(`handoff: no model at ${model}\n`); process.exit(2); }
const rows: Record<string, unknown>[] = [];
for (let i = 0; i < rounds; i++) {
  if (base) { rows.push(measure(`base (${base})`, path.join(base, 'dist/cli/main.js'))); process.stdout.write(JSON.stringify(rows.at(-1)) + '\n'); }
  rows.push(measure('this build', CLI));
  process.stdout.write(JSON.stringify(rows.at(-1)) + '\n');
}
const line = { bench: 'handoff', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents, tasks, tokens, warm, opts: extra.join(' '), rows };
fs.mkdirSync(path.dirname(outFile), { recursive: true });
fs.appendFileSync(outFile, JSON.stringify(line) + '\n');
