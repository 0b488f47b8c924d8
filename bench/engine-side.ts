/**
 * The batched engine and a bare `llama-server -np N` side by side, at the same time, on a machine
 * with a competing load: which of them the kernel gives the CPU to. Taken one after the other (as
 * engine-sched.ts does) each meets another moment of a shared machine's load; at the same time they
 * meet the same one. Beside them, one of the busy processes of the load is read as well: a process
 * that never sleeps, the share the scheduler gives a plain claimant. Each process's CPU of the wall
 * (all its threads, /proc/PID/task/TID/schedstat), its time runnable but waiting, its sleeps and
 * involuntary switches per generated token, the CPU it ran on, and its tokens/s.
 * Run: `npm run build && node dist/bench/engine-side.js [MODEL] [AGENTS] [SECONDS] [ROUNDS] [BUSY] [THREADS]`
 * (BUSY: busy processes, default one per core; THREADS: the engine's `threads=`, default 1; the bare
 * server runs `-t 1`); SWARM_ENGINE_STEP picks the engine's step. Appends to bench/results/engine-side.jsonl.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { machine, threadSched } from './proc.js';
import { batchedEngine, busyLoad, runFor, sharedServer, type EngineSet } from './engine-load.js';
import { ROOT } from './args.js';

const [model = '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', n = '8', secs = '8', rounds = '2', busy = String(os.availableParallelism()), threads = '1'] = process.argv.slice(2);
const N = Number(n), MS = Number(secs) * 1000;

interface Sched { run: number; wait: number; vol: number; inv: number; cpus: Set<number> }

/** Run, wait (ms), voluntary and involuntary switches over every thread of `pid`, and the CPUs they last ran on. */
function procSched(pid: number): Sched {
  const out: Sched = { run: 0, wait: 0, vol: 0, inv: 0, cpus: new Set() };
  for (const s of threadSched(pid).values()) {
    out.run += s.run; out.wait += s.wait; out.vol += s.sleeps; out.inv += s.preempted;
    if (s.run > 0) out.cpus.add(s.cpu);
  }
  return out;
}

const engineSet = async (): Promise<EngineSet> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-side-'));
  const set = await batchedEngine(model, N, threads, 512, dir);
  return { ...set, stop: async () => { await set.stop(); fs.rmSync(dir, { recursive: true, force: true }); } };
};

const load = Number(busy) > 0 ? busyLoad(Number(busy), 3_600_000) : undefined;
process.on('exit', () => load?.stop());
const rows: Record<string, unknown>[] = [];
for (let round = 0; round < Number(rounds); round++) {
  // Started in turn, the one started second alternating: both load their models before either is timed.
  const [a, b] = round % 2 ? [() => sharedServer(model, N, 1, 512), engineSet] : [engineSet, () => sharedServer(model, N, 1, 512)];
  const first = await a(), second = await b();
  const [engine, bare] = round % 2 ? [second, first] : [first, second];
  try {
    // SWARM_BENCH_PIN=CPU: engine, bare server and the busy processes all on one CPU (every thread), so
    // that where the balancer put each cannot be what separates them.
    const pin = process.env.SWARM_BENCH_PIN;
    // SWARM_BENCH_PIN_MAIN=1: of the bare server, its main (decoding) thread only, its HTTP threads free.
    const mainOnly = process.env.SWARM_BENCH_PIN_MAIN === '1';
    if (pin) for (const p of [engine.pids()[0]!, bare.pids()[0]!, ...(load?.pids ?? [])]) execFileSync('taskset', [...(mainOnly && p === bare.pids()[0] ? [] : ['-a']), '-cp', pin, String(p)], { stdio: 'ignore' });
    await Promise.all([runFor(engine, 3000, 32), runFor(bare, 3000, 32)]); // warm
    const who: [string, number][] = [['engine', engine.pids()[0]!], ['bare', bare.pids()[0]!], ...(load ? load.pids.map((p, i): [string, number] => [`busy${i}`, p]) : [])];
    const s0 = new Map(who.map(([k, p]) => [k, procSched(p)]));
    const t0 = performance.now();
    const [re, rb] = await Promise.all([runFor(engine, MS, 64), runFor(bare, MS, 64)]);
    const wall = performance.now() - t0;
    const tokens: Record<string, number> = { engine: re.tokens, bare: rb.tokens };
    const row: Record<string, unknown> = { round, load_before: os.loadavg()[0], tokens_per_s: { engine: re.tokens_per_s, bare: rb.tokens_per_s } };
    for (const [k, p] of who) {
      const x = s0.get(k)!, y = procSched(p);
      const pct = (v: number): number => Math.round(v / wall * 100);
      row[k] = {
        run_pct: pct(y.run - x.run), wait_pct: pct(y.wait - x.wait),
        ...(tokens[k] ? { sleeps_per_token: +((y.vol - x.vol) / tokens[k]!).toFixed(3), preempts_per_token: +((y.inv - x.inv) / tokens[k]!).toFixed(3), tokens_per_cpu_s: Math.round(tokens[k]! / ((y.run - x.run) / 1000)) } : { preempts_per_s: Math.round((y.inv - x.inv) / (wall / 1000)) }),
        cpus: [...y.cpus],
      };
    }
    rows.push(row);
    process.stdout.write(JSON.stringify(row) + '\n');
  } finally { await Promise.all([engine.stop(), bare.stop()]); }
}
load?.stop();
const out = { bench: 'engine-side', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, seconds: MS / 1000, busy: Number(busy), threads,
  step: process.env.SWARM_ENGINE_STEP ?? 'default', ...(process.env.SWARM_BENCH_PIN ? { pinned_to_cpu: process.env.SWARM_BENCH_PIN, bare_main_only: process.env.SWARM_BENCH_PIN_MAIN === '1' } : {}), load_avg: os.loadavg(), rows };
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.appendFileSync(path.join(ROOT, 'bench/results/engine-side.jsonl'), JSON.stringify(out) + '\n');
process.stdout.write(JSON.stringify({ load_avg: os.loadavg() }) + '\n');
