/**
 * Topology benchmarks:
 * 1. the runner's own cost per node (an instant in-memory executor: no hub, no inference);
 * 2. the scheduling overhead of a run on a hub, per node: a star run of N echo tasks against the
 *    same N tasks submitted flat, on one in-process hub with 8 echo workers (journal on);
 * 3. the wall time of each example in topologies/examples on stories260K with 8 embedded agents.
 * Run: `npm run build && node dist/bench/topologies.js [--skip-examples]`. Writes bench/results/topologies.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { Hub, hubConfig } from '../hub/index.js';
import { HubExecutor, RunManager } from '../hub/runs.js';
import { WorkerPool } from '../worker/index.js';
import { driverNames, registerDriver } from '../drivers/index.js';
import { embeddedFactory } from '../drivers/embedded/index.js';
import { Runner, loadExperiment, parseExperiment, resolveInputs, type Executor, type NodeResult, type RunSpec } from '../topologies/index.js';
import { machine } from './proc.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** The repo root, from dist/bench (built) or bench/ (run through a TypeScript loader). */
const ROOT = path.basename(path.dirname(HERE)) === 'dist' ? path.resolve(HERE, '../..') : path.resolve(HERE, '..');
const EXAMPLES = path.join(ROOT, 'topologies/examples');
const MODEL = path.resolve(process.env.SWARM_TEST_MODELS ?? path.join(ROOT, '../shared/models'), 'stories260K.gguf');
const log = pino({ level: 'silent' });

/** Answers every task on the next tick: what is left is the runner's own work. */
class InstantExecutor implements Executor {
  private readonly subs = new Set<(id: string, r: NodeResult) => void>();
  async submit(tasks: { id: string; meta: { role: string } }[]) {
    setImmediate(() => {
      for (const t of tasks) {
        const text = t.meta.role === 'guard' ? '{"verdict":"pass","reason":""}' : 'x';
        for (const cb of this.subs) cb(t.id, { ok: true, text, receipt: { tokens_out: 1, duration_ms: 0 } });
      }
    });
    return tasks.map((t) => ({ id: t.id }));
  }
  onFinal(cb: (id: string, r: NodeResult) => void) { this.subs.add(cb); return () => this.subs.delete(cb); }
}

function spec(yaml: string): RunSpec {
  const experiment = parseExperiment(yaml);
  return { experiment, inputs: resolveInputs(experiment, ROOT) };
}

const lines = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => `line ${i}`.padEnd(15, '.')).join('\n'));

async function runnerOnly() {
  const out: Record<string, unknown>[] = [];
  const cases: [string, RunSpec][] = [
    ['star 2000', spec(`topology: star\ninputs: {items: ${JSON.stringify(Array.from({ length: 2000 }, (_, i) => `item ${i}`))}}`)],
    ['map-reduce 2000 chunks, fan-in 4', spec(`topology: map-reduce\nmap_reduce: {fan_in: 4}\ninputs: {chunk_chars: 16, text: ${lines(2000)}}`)],
    ['map-reduce 20000 chunks, fan-in 8', spec(`topology: map-reduce\nmap_reduce: {fan_in: 8}\ninputs: {chunk_chars: 16, text: ${lines(20000)}}`)],
  ];
  for (const [name, s] of cases) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const r = await new Runner({ runId: 'bench', spec: s, executor: new InstantExecutor() }).run();
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const nodes = r.progress.submitted;
    out.push({ case: name, nodes, verdict: r.verdict, wall_ms: Math.round(ms), us_per_node: Math.round((ms * 1000) / nodes), cpu_us_per_node: Math.round((cpu.user + cpu.system) / nodes) });
  }
  return out;
}

async function startSwarm(agents: number, driver: { name: string; model?: string; options: Record<string, string> }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-topo-'));
  const hub = new Hub(hubConfig({ port: 0, stateDir: dir }), log);
  const addr = await hub.start();
  const pool = new WorkerPool({ ids: Array.from({ length: agents }, (_, i) => `b-${i + 1}`), driver, locate: async () => addr }, log);
  const done = pool.run();
  while (hub.registry.size < agents) await new Promise((r) => setTimeout(r, 10));
  const runs = new RunManager(hub, { dir: path.join(dir, 'runs'), version: 'bench', log });
  return {
    hub, runs, dir,
    stop: async () => { await pool.stop('bench over'); await done; await hub.stop({ killWorkers: true, graceMs: 1000 }); fs.rmSync(dir, { recursive: true, force: true }); },
  };
}

async function hubOverhead(n = 2000, reps = 3) {
  const s = await startSwarm(8, { name: 'echo', options: {} });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  try {
    const all: Awaited<ReturnType<typeof once>>[] = [];
    for (let i = 0; i < reps; i++) all.push(await once(s, n, i));
    const m = (k: keyof Awaited<ReturnType<typeof once>>) => Math.round(median(all.map((x) => x[k])));
    return {
      tasks: n, workers: 8, repetitions: reps, flat_ms: m('flat'), star_runner_only_ms: m('bare'), star_run_ms: m('star'),
      runner_overhead_us_per_node: Math.round(median(all.map((x) => ((x.bare - x.flat) * 1000) / n))),
      run_with_folder_overhead_us_per_node: Math.round(median(all.map((x) => ((x.star - x.flat) * 1000) / n))),
      map_reduce: { nodes: all[0]!.mrNodes, wall_ms: m('mapReduce'), us_per_node: Math.round((m('mapReduce') * 1000) / all[0]!.mrNodes) },
    };
  } finally { await s.stop(); }
}

async function once(s: Awaited<ReturnType<typeof startSwarm>>, n: number, rep: number) {
  const waitAll = (ids: Set<string>) => new Promise<void>((resolve) => {
    const off = s.hub.store.onChange((rec) => { if (ids.delete(rec.id) && ids.size === 0) { off(); resolve(); } });
  });
  // warm-up
  const warm = new Set(Array.from({ length: 500 }, (_, i) => `warm-${rep}-${i}`));
  const w = waitAll(new Set(warm));
  await s.hub.submit([...warm].map((id) => ({ id, prompt: id })));
  await w;
  const ids = new Set(Array.from({ length: n }, (_, i) => `flat-${rep}-${i}`));
  const t0 = performance.now();
  const f = waitAll(new Set(ids));
  await s.hub.submit([...ids].map((id) => ({ id, prompt: `item ${id}` })));
  await f;
  const flat = performance.now() - t0;
  const items = JSON.stringify(Array.from({ length: n }, (_, i) => `item ${i}`));
  // The runner on the hub without a run folder: scheduling alone.
  const tb = performance.now();
  await new Runner({ runId: `bare-${rep}`, spec: spec(`topology: star\ninputs: {items: ${items}}`), executor: new HubExecutor(s.hub) }).run();
  const bare = performance.now() - tb;
  const t1 = performance.now();
  const { run } = await s.runs.start({ experiment: `topology: star\ninputs: {items: ${items}}` });
  await s.runs.wait(run);
  const star = performance.now() - t1;
  const t2 = performance.now();
  const mr = await s.runs.start({ experiment: `topology: map-reduce\nmap_reduce: {fan_in: 4}\ninputs: {chunk_chars: 16, text: ${lines(n)}}` });
  const mrOut = await s.runs.wait(mr.run);
  const mapReduce = performance.now() - t2;
  return { flat, bare, star, mapReduce, mrNodes: mrOut?.progress.submitted ?? 1 };
}

async function examples(agents = 8) {
  if (!fs.existsSync(MODEL)) return { skipped: `no model at ${MODEL}` };
  if (!driverNames().includes('embedded')) registerDriver('embedded', embeddedFactory);
  const s = await startSwarm(agents, { name: 'embedded', model: MODEL, options: { ctx: '512' } });
  const out: Record<string, unknown>[] = [];
  try {
    // Engines load on their first task: warm every agent up before timing.
    const warm = await s.runs.start({ experiment: { topology: 'star', inputs: { items: Array.from({ length: agents * 2 }, (_, i) => `warm ${i}`) }, limits: { max_tokens: 4 } } });
    await s.runs.wait(warm.run);
    for (const f of fs.readdirSync(EXAMPLES).filter((x) => x.endsWith('.yaml')).sort()) {
      const e = loadExperiment(path.join(EXAMPLES, f));
      const t0 = performance.now();
      const { run } = await s.runs.start({ experiment: e, base_dir: EXAMPLES });
      const r = await s.runs.wait(run);
      out.push({ example: f, nodes: r?.progress.submitted, verdict: r?.verdict, wall_ms: Math.round(performance.now() - t0), tokens_out: r?.progress.tokens_out });
    }
  } finally { await s.stop(); }
  return { agents, model: 'stories260K.gguf', runs: out };
}

const results = {
  machine: machine(), node: process.version, date: new Date().toISOString(),
  runner_only: await runnerOnly(),
  hub_overhead: await hubOverhead(),
  examples: process.argv.includes('--skip-examples') ? { skipped: '--skip-examples' } : await examples(),
};
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.writeFileSync(path.join(ROOT, 'bench/results/topologies.json'), JSON.stringify(results, null, 2) + '\n');
console.log(JSON.stringify(results, null, 2));
process.exit(0);
