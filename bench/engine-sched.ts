/**
 * Where the batched engine's wall time goes on a busy machine, beside a bare `llama-server -np N -t 1`:
 * each thread's time running and time runnable but waiting for a CPU (/proc/PID/task/TID/schedstat)
 * over a fixed time of N agents generating back to back, under as many busy processes as cores (each
 * in a session of its own, engine-load.ts busyLoad), and how often each thread went to sleep per
 * generated token (voluntary context switches): each wake-up on a busy machine is a wait for a CPU.
 * Alternating rounds, one thread count. With SWARM_BENCH_BASE_ADDON=DIR (another self-built addon, or
 * `prebuilt`) a row more runs the engine on that addon (SWARM_ADDON), e.g. one without the fused step;
 * with SWARM_BENCH_STEPS=sync,fused,split a row per step kind (SWARM_ENGINE_STEP, step-loop.ts).
 * Run: `npm run build && node dist/bench/engine-sched.js [MODEL] [AGENTS] [SECONDS] [ROUNDS] [loaded|quiet]`;
 * appends to bench/results/engine-sched.jsonl.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { machine, threadSched } from './proc.js';
import { batchedEngine, busyLoad, runFor, sharedServer, type EngineSet } from './engine-load.js';
import { ROOT } from './args.js';
import { findSelfBuiltAddon } from '../drivers/llama-build/addon-paths.js';

const [model = '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', n = '8', secs = '8', rounds = '2', condition = 'loaded'] = process.argv.slice(2);
const N = Number(n);
const MS = Number(secs) * 1000;

async function measure(config: string, start: () => Promise<EngineSet>, round: number): Promise<Record<string, unknown>> {
  const set = await start();
  try {
    await runFor(set, 3000, 32); // warm
    const pid = set.pids()[0]!;
    const a = threadSched(pid);
    const t0 = performance.now();
    const r = await runFor(set, MS, 64);
    const b = threadSched(pid);
    const wall = performance.now() - t0;
    const threads = [...b].map(([tid, s]) => { const s0 = a.get(tid) ?? { run: 0, wait: 0, sleeps: 0 }; return { tid, run: s.run - s0.run, wait: s.wait - s0.wait, sleeps: s.sleeps - s0.sleeps }; });
    threads.sort((x, y) => y.run - x.run);
    const pct = (x: number): number => Math.round(x / wall * 100);
    // The two busiest threads: the decoding one and, in the engine, its main thread.
    // Sleeps per generated token: a thread that goes to sleep between steps waits for a CPU again on
    // each wake-up; the kernel may count a sleeping thread that has run ahead of its share as waiting
    // (EEVDF's delayed dequeue), so `wait_pct` alone does not say it was runnable.
    const hot = threads.slice(0, 2).map((t) => ({ run_pct: pct(t.run), wait_pct: pct(t.wait), sleeps_per_token: +(t.sleeps / Math.max(1, r.tokens)).toFixed(2) }));
    const cpu = threads.reduce((s, t) => s + t.run, 0);
    // Every thread's sleeps: the wake-ups the process needed per generated token, whichever thread took them.
    const sleeps = threads.reduce((s, t) => s + t.sleeps, 0);
    return { round, config, tokens_per_s: r.tokens_per_s, cpu_of_wall_pct: pct(cpu), tokens_per_cpu_s: Math.round(r.tokens / (cpu / 1000)), hot_threads: hot,
      sleeps_per_token: +(sleeps / Math.max(1, r.tokens)).toFixed(2), load_before: os.loadavg()[0] };
  } finally { await set.stop(); }
}

const baseAddon = process.env.SWARM_BENCH_BASE_ADDON;
const steps = (process.env.SWARM_BENCH_STEPS ?? '').split(',').filter(Boolean);
const load = condition === 'loaded' ? busyLoad(os.availableParallelism(), 3_600_000) : undefined;
process.on('exit', () => load?.stop());
const rows: Record<string, unknown>[] = [];
for (let round = 0; round < Number(rounds); round++) {
  const engine = async (env: Record<string, string> = {}): Promise<EngineSet> => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-sched-'));
    // The engine process takes the environment of the agent that starts it.
    const was = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    Object.assign(process.env, env);
    let set: Awaited<ReturnType<typeof batchedEngine>>;
    try { set = await batchedEngine(model, N, '1', 512, dir); } finally {
      for (const [k, v] of Object.entries(was)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    }
    return { ...set, stop: async () => { await set.stop(); fs.rmSync(dir, { recursive: true, force: true }); } };
  };
  const order: [string, () => Promise<EngineSet>][] = steps.length
    ? steps.map((k) => [`batched -t 1 step=${k}`, () => engine({ SWARM_ENGINE_STEP: k })])
    : [['batched -t 1', () => engine()]];
  if (baseAddon) order.push([`batched -t 1 addon=${baseAddon}`, () => engine({ SWARM_ADDON: baseAddon })]);
  order.push(['bare -t 1', () => sharedServer(model, N, 1, 512)]);
  if (round % 2) order.reverse();
  for (const [name, start] of order) { const row = await measure(name, start, round); rows.push(row); process.stdout.write(JSON.stringify(row) + '\n'); }
}
load?.stop();
const out = { bench: 'engine-sched', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, seconds: MS / 1000, condition, load_avg: os.loadavg(),
  addon: findSelfBuiltAddon()?.addon ?? 'prebuilt', ...(baseAddon ? { base_addon: baseAddon } : {}), rows };
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.appendFileSync(path.join(ROOT, 'bench/results/engine-sched.jsonl'), JSON.stringify(out) + '\n');
process.stdout.write(JSON.stringify({ load_avg: os.loadavg() }) + '\n');
