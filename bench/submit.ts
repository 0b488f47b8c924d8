/**
 * End-to-end submit throughput: `swarm up -n 25 --driver echo --detach` (failover on, as `up` starts
 * it; and with --no-failover, the cheaper baseline, alternating), one warm-up batch, then
 * `swarm submit --file F --wait --json` of 5,000 tasks, timed two ways: the whole command's wall time
 * (CLI start, upload, journal, dispatch, /wait, output) and hub-side (the journal's first accepted
 * task to its last durable result). CPU of the CLI, the hub and the 25 workers beside: on two shared
 * cores the wall time follows the load, the CPU much less.
 *
 * `--warm N` sets the warm-up batch (1,000) and `--idle-ms N` waits that long after it, as a swarm
 * that ran a batch and sat idle before the next. `machine_*` are /proc/stat over the command: CPU-s
 * used by everything, left idle, and stolen by the hypervisor (this VM's host is shared).
 *
 * `--batches N` measures N batches one after another on the same swarm (a record each, `batch` 0..N-1).
 *
 * `--procs auto,25` compares the worker processes `up` starts for echo agents (auto: one per core
 * less one) with a process per agent, alternating in each round. `workers_rss_mb` and
 * `workers_pss_mb` are their memory, idle after `up`.
 *
 * Run: `node dist/bench/submit.js [--tasks 5000] [--workers 25] [--rounds 2] [--slots 1] [--procs auto] [--warm 1000] [--idle-ms 0] [--batches 1] [--out FILE]`.
 * Appends one line per run to bench/results/submit.jsonl (or --out).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, CLI, arg, checkArgs } from './args.js';
import { cpuSeconds, machine, machineCpu, mainThreadSched, pssMb, rssMb, syscalls } from './proc.js';

const TASKS = Number(arg('tasks', '5000'));
const WORKERS = Number(arg('workers', '25'));
const ROUNDS = Number(arg('rounds', '2'));
/** Tasks in flight per worker (`swarm up --slots`); 1 is what `up` starts. */
const SLOTS = Number(arg('slots', '1'));
/**
 * Worker processes (`swarm up --procs`): `auto`, what `up` starts, or a number (25 = a process per
 * agent, as `up` started echo agents before `--procs`); a comma list alternates them in each round.
 */
const PROCS = arg('procs', 'auto').split(',');
const WARM = Number(arg('warm', '1000'));
const IDLE_MS = Number(arg('idle-ms', '0'));
/** Measured batches on each swarm, one after another: the first shows a cold start, the later ones a warm swarm. */
const BATCHES = Number(arg('batches', '1'));
const OUT = arg('out', path.join(ROOT, 'bench/results/submit.jsonl'));
checkArgs('submit', 'End-to-end submit throughput: swarm up -n N --driver echo (with and without failover, alternating), swarm submit --file --wait of M tasks.');

/** CPU seconds of this process's waited-for children so far (fields cutime, cstime of /proc/self/stat). */
function childrenCpu(): number {
  const s = fs.readFileSync('/proc/self/stat', 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) / 100;
}

function swarm(args: string[], dir: string): { stdout: string; ms: number; cliCpu: number } {
  const c0 = childrenCpu();
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [CLI, ...args, '--state-dir', dir], { encoding: 'utf8', maxBuffer: 1 << 30 });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`swarm ${args[0]}: exit ${r.status}: ${r.stderr.slice(-2000)}`);
  return { stdout: r.stdout, ms, cliCpu: childrenCpu() - c0 };
}

function pids(dir: string): { hub: number; workers: number[] } {
  const hub = (JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')) as { pid: number }).pid;
  // A pid file per worker id; a process of several workers is named by each of theirs.
  const workers = new Set(fs.readdirSync(path.join(dir, 'pids')).map((f) => {
    const txt = fs.readFileSync(path.join(dir, 'pids', f), 'utf8');
    return txt.trim().startsWith('{') ? (JSON.parse(txt) as { pid: number }).pid : Number(txt);
  }));
  return { hub, workers: [...workers] };
}
const memOf = (ps: number[], mb: (pid: number) => number) => ps.reduce((a, p) => { try { return a + mb(p); } catch { return a; } }, 0);
const cpuOf = (ps: number[]) => ps.reduce((a, p) => { try { return a + cpuSeconds(p); } catch { return a; } }, 0);
/** Read and write system calls of these processes together (a process gone counts 0). */
const callsOf = (ps: number[]) => ps.reduce((a, p) => { try { const c = syscalls(p); return { reads: a.reads + c.reads, writes: a.writes + c.writes }; } catch { return a; } }, { reads: 0, writes: 0 });

/** Hub-side time of one batch: the first 'task' record's time to the last 'result' record's, from the journal. */
function hubSideMs(dir: string, ids: Set<string>): number {
  let first = Infinity, last = 0;
  for (const line of fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').split('\n')) {
    if (!line) continue;
    const r = JSON.parse(line) as { t: string; at: number; id?: string; spec?: { id: string } };
    if (r.t === 'task' && ids.has(r.spec!.id)) first = Math.min(first, r.at);
    if (r.t === 'result' && ids.has(r.id!)) last = Math.max(last, r.at);
  }
  return last - first;
}

function writeTasks(file: string, n: number, tag: string): Set<string> {
  const ids = new Set<string>();
  const lines: string[] = [];
  for (let i = 0; i < n; i++) { const id = `${tag}-${i}`; ids.add(id); lines.push(JSON.stringify({ id, prompt: `task ${i}` })); }
  fs.writeFileSync(file, lines.join('\n') + '\n');
  return ids;
}

/** One swarm: up, the warm-up, then BATCHES measured batches one after another (a record each). */
async function once(failover: boolean, round: number, procs: string): Promise<Record<string, unknown>[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-submit-'));
  try {
    const up = swarm(['up', '-n', String(WORKERS), '--driver', 'echo', '--detach', '--json', '--slots', String(SLOTS), '--procs', procs, ...(failover ? [] : ['--no-failover'])], dir);
    // The worker processes' memory, idle after up, before any task (summed; RSS counts shared pages once per process, PSS shares them out).
    const ws = pids(dir).workers;
    const mem = { workers_rss_mb: Math.round(memOf(ws, rssMb)), workers_pss_mb: Math.round(memOf(ws, pssMb)) };
    const warmFile = path.join(dir, 'warm.jsonl');
    writeTasks(warmFile, WARM, `warm${round}`);
    swarm(['submit', '--file', warmFile, '--wait', '--json'], dir);
    if (IDLE_MS > 0) await new Promise((r) => setTimeout(r, IDLE_MS));
    const out: Record<string, unknown>[] = [];
    for (let batch = 0; batch < BATCHES; batch++) out.push({ ...measure(dir, failover, round, batch, up.ms), ...mem });
    return out;
  } finally {
    spawnSync(process.execPath, [CLI, 'down', '--state-dir', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function measure(dir: string, failover: boolean, round: number, batch: number, upMs: number): Record<string, unknown> {
  const file = path.join(dir, `tasks-${batch}.jsonl`);
  const ids = writeTasks(file, TASKS, `t${round}-${batch}`);
  const p = pids(dir);
  const h0 = cpuOf([p.hub]), w0 = cpuOf(p.workers);
  const each0 = p.workers.map((w) => cpuOf([w]));
  const hc0 = callsOf([p.hub]), wc0 = callsOf(p.workers);
  const load = os.loadavg()[0]!;
  const m0 = machineCpu();
  const s0 = mainThreadSched(p.hub);
  const r = swarm(['submit', '--file', file, '--wait', '--json'], dir);
  const m1 = machineCpu();
  const s1 = mainThreadSched(p.hub);
  const hubCpu = cpuOf([p.hub]) - h0, workerCpu = cpuOf(p.workers) - w0;
  const hc = callsOf([p.hub]), wc = callsOf(p.workers);
  // Per worker, highest first: the failover state holders stand out from the rest.
  const each = p.workers.map((w, i) => +(cpuOf([w]) - each0[i]!).toFixed(2)).sort((a, b) => b - a);
  const out = JSON.parse(r.stdout) as { complete: boolean; tasks: { state: string }[] };
  const hubMs = hubSideMs(dir, ids);
  return {
    date: new Date().toISOString(), machine: machine(), failover, tasks: TASKS, workers: WORKERS, worker_processes: p.workers.length, slots: SLOTS, warm: WARM, idle_ms: IDLE_MS, round, batch,
    done: out.tasks.filter((t) => t.state === 'done').length, complete: out.complete, up_ms: Math.round(upMs),
    command_ms: Math.round(r.ms), command_tasks_per_s: Math.round(TASKS / (r.ms / 1000)),
    hub_side_ms: hubMs, hub_side_tasks_per_s: Math.round(TASKS / (hubMs / 1000)),
    cli_cpu_s: +r.cliCpu.toFixed(2), hub_cpu_s: +hubCpu.toFixed(2), workers_cpu_s: +workerCpu.toFixed(2),
    workers_cpu_top: each.slice(0, 5), workers_cpu_median: each[each.length >> 1],
    hub_reads: hc.reads - hc0.reads, hub_writes: hc.writes - hc0.writes, workers_reads: wc.reads - wc0.reads, workers_writes: wc.writes - wc0.writes,
    load_avg_1m_before: +load.toFixed(1), load_avg_1m_after: +os.loadavg()[0]!.toFixed(1),
    // The whole machine over the command: CPU-s used (all processes), left idle, and stolen by the host.
    // The hub's main thread: time it ran, and time it was ready to run but waited for a core.
    hub_main_run_ms: Math.round(s1.run - s0.run), hub_main_wait_ms: Math.round(s1.wait - s0.wait),
    machine_busy_s: +(m1.busy - m0.busy).toFixed(2), machine_idle_s: +(m1.idle - m0.idle).toFixed(2), machine_steal_s: +(m1.steal - m0.steal).toFixed(2),
  };
}

for (let round = 0; round < ROUNDS; round++) {
  for (const procs of PROCS) {
    for (const failover of [true, false]) {
      for (const r of await once(failover, round, procs)) {
        const rec = { procs, ...r };
        fs.appendFileSync(OUT, JSON.stringify(rec) + '\n');
        console.log(JSON.stringify(rec));
      }
    }
  }
}
