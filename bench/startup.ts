/**
 * Startup benchmark (target: `swarm up --agents 25` on stories260K ready in under 5 s). For each N:
 * - `swarm up --agents N --detach` on a private copy of the model: `ready_ms` as `up` reports it (every
 *   worker registered with the hub), then N one-token tasks submitted at once: `serving_ms`, from the
 *   start of `up` until every task is answered (the engines have loaded and generate);
 * - the CPU seconds every process of the swarm used by then (hub, workers, engine hosts and the
 *   children they reaped), and the PSS of each worker and engine host (per agent);
 * - engines alone (BENCH_ENGINES=1): N embedded drivers started at once in this process, no hub, and
 *   the load phases their hosts report (node-llama-cpp, model, context).
 * The load average is recorded beside each row: the machine is shared, and 2 cores are all there is.
 * Run: `npm run build && node dist/bench/startup.js` (env BENCH_AGENTS=1,8,25, BENCH_REPEAT=1,
 * BENCH_DRIVER=embedded, BENCH_MODEL=path, BENCH_ENGINES=1, BENCH_SETTLE_MS=5000 before memory, BENCH_OUT=file). Writes bench/results/startup.json.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedDriver } from '../drivers/embedded/index.js';
import { machine, pssMb, quantile } from './proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/cli/main.js');
const MODELS_DIR = process.env.SWARM_TEST_MODELS ?? path.resolve(ROOT, '../shared/models');
const MODEL = process.env.BENCH_MODEL ?? path.join(MODELS_DIR, 'stories260K.gguf');
const DRIVER = process.env.BENCH_DRIVER ?? 'embedded';
const AGENTS = (process.env.BENCH_AGENTS ?? '1,8,25').split(',').map(Number).filter((n) => n > 0);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 1);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 5000);
const OUT = process.env.BENCH_OUT ?? path.join(ROOT, 'bench/results/startup.json');

const load1 = (): number => +os.loadavg()[0]!.toFixed(1);

/** CPU seconds of a process and of the children it has reaped (utime, stime, cutime, cstime). */
function cpuWithChildren(pid: number): number {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch { return 0; }
}

/** Live processes whose command line mentions `needle`, by kind. */
function swarmProcesses(needle: string): { pid: number; kind: 'hub' | 'worker' | 'engine' | 'other' }[] {
  const out: { pid: number; kind: 'hub' | 'worker' | 'engine' | 'other' }[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    let cmd: string[];
    try { cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0'); } catch { continue; }
    if (!cmd.some((a) => a.includes(needle))) continue;
    const kind = cmd[0]!.endsWith('/sh') ? 'other'
      : cmd.some((a) => /embedded\/host\.js$/.test(a)) ? 'engine'
        : cmd.includes('worker') ? 'worker' : cmd.includes('hub') ? 'hub' : 'other';
    out.push({ pid: Number(d), kind });
  }
  return out;
}

const cli = (args: string[], timeoutMs = 300_000) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: timeoutMs });

interface UpRow {
  agents: number; driver: string; ready_ms: number; serving_ms: number; workers_answering: number;
  cpu_s: number; cpu_s_per_agent: number; worker_pss_mb: number; engine_pss_mb: number; pss_per_agent_mb: number;
  loadavg_before: number; loadavg_after: number;
}

/** One `swarm up` of N agents, measured, then brought down. */
function upOnce(n: number): UpRow {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-startup-'));
  const state = path.join(dir, 'state');
  const model = path.join(dir, path.basename(MODEL));
  fs.copyFileSync(MODEL, model);
  const loadBefore = load1();
  try {
    const t0 = performance.now();
    const up = cli(['up', '--agents', String(n), '--driver', DRIVER, '--model', model, '--detach', '--json', '--state-dir', state]);
    if (up.status !== 0) throw new Error(`swarm up failed: ${up.stderr}`);
    const { ready_ms } = JSON.parse(up.stdout) as { ready_ms: number };
    const file = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(file, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `t-${i}`, prompt: 'Once upon a time', max_tokens: 1, temperature: 0 })).join('\n') + '\n');
    const sub = cli(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
    const serving = performance.now() - t0;
    if (sub.status !== 0) throw new Error(`swarm submit failed: ${sub.stderr}`);
    const res = JSON.parse(sub.stdout) as { tasks: { state: string; receipt?: { worker?: string } }[] };
    if (res.tasks.some((x) => x.state !== 'done')) throw new Error('a task failed');
    let procs = swarmProcesses(dir);
    const cpu = procs.reduce((a, p) => a + cpuWithChildren(p.pid), 0);
    // Memory after the swarm has been idle a moment (V8 shrinks its heaps when idle), the same for every run.
    spawnSync('sleep', [String(SETTLE_MS / 1000)]);
    procs = swarmProcesses(dir);
    const pss = (kind: string) => procs.filter((p) => p.kind === kind).reduce((a, p) => { try { return a + pssMb(p.pid); } catch { return a; } }, 0);
    const w = pss('worker'), e = pss('engine');
    return {
      agents: n, driver: DRIVER, ready_ms, serving_ms: Math.round(serving), workers_answering: new Set(res.tasks.map((x) => x.receipt?.worker)).size,
      cpu_s: +cpu.toFixed(2), cpu_s_per_agent: +(cpu / n).toFixed(3),
      worker_pss_mb: +(w / n).toFixed(1), engine_pss_mb: +(e / n).toFixed(1), pss_per_agent_mb: +((w + e) / n).toFixed(1),
      loadavg_before: loadBefore, loadavg_after: load1(),
    };
  } finally {
    cli(['down', '--state-dir', state], 60_000);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

interface EngineRow { agents: number; load_path: string; all_ready_ms: number; total_p50_ms: number; boot_p50_ms: number; llama_p50_ms: number; model_p50_ms: number; context_p50_ms: number; loadavg: number }

/** N embedded engines started at once, no hub: how long until all are loaded, and their phases. */
async function enginesOnce(n: number): Promise<EngineRow> {
  const drivers = Array.from({ length: n }, () => new EmbeddedDriver({ name: 'embedded', model: MODEL, options: {} }));
  try {
    const t0 = performance.now();
    await Promise.all(drivers.map((d) => d.start()));
    const all = performance.now() - t0;
    const p = (k: 'total' | 'boot' | 'llama' | 'model' | 'context') => Math.round(quantile(drivers.map((d) => (d.loadTimes as Record<string, number> | undefined)?.[k] ?? 0), 0.5));
    return { agents: n, load_path: String((drivers[0] as { loadPath?: string }).loadPath ?? 'getLlama'), all_ready_ms: Math.round(all), total_p50_ms: p('total'), boot_p50_ms: p('boot'), llama_p50_ms: p('llama'), model_p50_ms: p('model'), context_p50_ms: p('context'), loadavg: load1() };
  } finally {
    await Promise.all(drivers.map((d) => d.stop()));
  }
}

async function main(): Promise<void> {
  if (!fs.existsSync(MODEL)) throw new Error(`model not found: ${MODEL}`);
  process.stderr.write(`${machine()}; model ${MODEL}\n`);
  const ups: UpRow[] = [];
  const engines: EngineRow[] = [];
  for (let r = 0; r < REPEAT; r++) {
    for (const n of AGENTS) {
      if (process.env.BENCH_ENGINES === '1' && DRIVER === 'embedded') {
        const e = await enginesOnce(n);
        engines.push(e);
        process.stderr.write(`engines ${JSON.stringify(e)}\n`);
      }
      const u = upOnce(n);
      ups.push(u);
      process.stderr.write(`up ${JSON.stringify(u)}\n`);
    }
  }
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.writeFileSync(OUT, JSON.stringify({ machine: machine(), model: path.basename(MODEL), at: new Date().toISOString(), up: ups, engines }, null, 2) + '\n');
  console.log('agents | ready (up) | serving (all answered) | CPU s / agent | PSS / agent (worker + engine) | load avg');
  for (const u of ups) {
    console.log(`${u.agents} | ${(u.ready_ms / 1000).toFixed(2)} s | ${(u.serving_ms / 1000).toFixed(2)} s | ${u.cpu_s_per_agent} | ${u.pss_per_agent_mb} MB (${u.worker_pss_mb} + ${u.engine_pss_mb}) | ${u.loadavg_before} → ${u.loadavg_after}`);
  }
}

main().catch((err: unknown) => { console.error(err); process.exit(1); });
