/**
 * What experiments add to a run: scoring and statistics, and the dataset runner's bookkeeping.
 * 1. Scoring + statistics alone for 1,000 items × 6 conditions (exact scorer; per-condition
 *    mean/se/bootstrap, five paired bootstraps with McNemar), the work a finished experiment does;
 * 2. a 1,000-item experiment (star + single + majority_vote k=3 + self_consistency k=3: 8,000 nodes)
 *    on an in-process hub with 8 echo workers, with its run folder: wall time, and the share of it
 *    spent in finishing (scoring, statistics) measured on the same results;
 * 3. the runner alone (instant executor): that experiment against a star of the same 8,000 nodes.
 * 4. checks of the statistics with fixed seeds: the coverage of the 95% intervals of 0/1 scores
 *    (Clopper-Pearson against the percentile bootstrap) at n = 20, and majority-of-5 on letter answers
 *    in varied wording voting on the whole text against voting on the extracted letter.
 * Run: `npm run build && node dist/bench/experiments.js`. Writes bench/results/experiments.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { Hub, hubConfig } from '../hub/index.js';
import { RunManager } from '../hub/runs.js';
import { WorkerPool } from '../worker/index.js';
import { Runner, parseExperiment, resolveInputs, type Executor, type NodeResult, type RunSpec } from '../topologies/index.js';
import { bootstrapCi, experimentTopology, finishExperiment, makeArithmetic, paired, summarise } from '../topologies/experiment/index.js';
import { scorePure, voteKey } from '../topologies/scorers/index.js';
import { ScorerSchema } from '../topologies/schema.js';
import { seededRandom } from '../protocol/index.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.basename(path.dirname(HERE)) === 'dist' ? path.resolve(HERE, '../..') : path.resolve(HERE, '..');
const log = pino({ level: 'silent' });
const N = 1000;

class InstantExecutor implements Executor {
  private readonly subs = new Set<(id: string, r: NodeResult) => void>();
  async submit(tasks: { id: string; prompt: string }[]) {
    setImmediate(() => { for (const t of tasks) for (const cb of this.subs) cb(t.id, { ok: true, text: `echo: ${t.prompt}`, receipt: { tokens_in: 20, tokens_out: 20, duration_ms: 0 } }); });
    return tasks.map((t) => ({ id: t.id }));
  }
  onFinal(cb: (id: string, r: NodeResult) => void) { this.subs.add(cb); return () => this.subs.delete(cb); }
}

function scoringAndStats(conditions = 6) {
  const items = makeArithmetic(N, 1);
  const scorer = { type: 'exact', case_sensitive: false, strip_punctuation: false, extract: 'last_number' } as const;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const vecs: number[][] = [];
  for (let c = 0; c < conditions; c++) vecs.push(items.map((it, i) => scorePure(scorer, `The answer is ${(i + c) % 3 ? it.expected : 0}.`, it.expected).score ?? 0));
  const t1 = performance.now();
  const sums = vecs.map((v, c) => summarise(v, c));
  const pairs = vecs.slice(1).map((v, c) => paired(vecs[0]!, v, 100 + c));
  const t2 = performance.now();
  const cpu = process.cpuUsage(c0);
  return { items: N, conditions, scoring_ms: +(t1 - t0).toFixed(1), statistics_ms: +(t2 - t1).toFixed(1), total_ms: +(t2 - t0).toFixed(1), total_cpu_ms: +((cpu.user + cpu.system) / 1000).toFixed(1), check: [sums[0]!.mean, pairs[0]!.mean_diff] };
}

function dataset(): { dir: string; yaml: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-exp-'));
  fs.writeFileSync(path.join(dir, 'items.jsonl'), makeArithmetic(N, 1).map((i) => JSON.stringify(i)).join('\n'));
  const yaml = 'name: bench-exp\ntopology: star\ninputs: {dataset: items.jsonl, concurrency: 64}\nbaselines: [single, majority_vote, self_consistency]\nbaseline: {k: 3}\nroles: {baseline: {temperature: 0.7}}\nscorer: {type: exact, extract: last_number}\nlimits: {max_inflight: 10000}\n';
  return { dir, yaml };
}

async function runnerOnly() {
  const { dir, yaml } = dataset();
  const exp = parseExperiment(yaml);
  const spec: RunSpec = { experiment: exp, inputs: resolveInputs(exp, dir) };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const runner = new Runner({ runId: 'bench', spec, executor: new InstantExecutor() });
  const out = await runner.run();
  const expMs = performance.now() - t0;
  const cpuA = process.cpuUsage(c0);
  const nodes = out.progress.submitted;
  const star = parseExperiment(`topology: star\ninputs: {items: ${JSON.stringify(Array.from({ length: nodes }, (_, i) => `item ${i}`))}}\nlimits: {max_inflight: 10000}`);
  const c1 = process.cpuUsage();
  const t1 = performance.now();
  await new Runner({ runId: 'bench2', spec: { experiment: star, inputs: resolveInputs(star, dir) }, executor: new InstantExecutor() }).run();
  const starMs = performance.now() - t1;
  const cpuB = process.cpuUsage(c1);
  fs.rmSync(dir, { recursive: true, force: true });
  return { nodes, experiment_ms: Math.round(expMs), star_same_nodes_ms: Math.round(starMs), us_per_node_experiment: Math.round((expMs * 1000) / nodes), us_per_node_star: Math.round((starMs * 1000) / nodes),
    cpu_us_per_node_experiment: Math.round((cpuA.user + cpuA.system) / nodes), cpu_us_per_node_star: Math.round((cpuB.user + cpuB.system) / nodes) };
}

async function onHub(agents = 8) {
  const { dir, yaml } = dataset();
  const hub = new Hub(hubConfig({ port: 0, stateDir: dir }), log);
  const addr = await hub.start();
  const pool = new WorkerPool({ ids: Array.from({ length: agents }, (_, i) => `b-${i + 1}`), driver: { name: 'echo', options: {} }, locate: async () => addr }, log);
  const done = pool.run();
  while (hub.registry.size < agents) await new Promise((r) => setTimeout(r, 10));
  const runs = new RunManager(hub, { dir: path.join(dir, 'runs'), version: 'bench', log });
  try {
    const t0 = performance.now();
    const { run } = await runs.start({ experiment: yaml, base_dir: dir });
    const out = (await runs.wait(run))!;
    const wall = performance.now() - t0;
    // Finishing again on the same results: what scoring and statistics cost inside that run.
    const spec = JSON.parse(fs.readFileSync(path.join(dir, 'runs', run, 'spec.json'), 'utf8')) as RunSpec;
    const results = new Map<string, NodeResult>();
    for (const line of fs.readFileSync(path.join(dir, 'runs', run, 'nodes.jsonl'), 'utf8').split('\n')) {
      if (!line) continue;
      const o = JSON.parse(line) as { node: string; output: string; metrics: { receipt: NodeResult['receipt'] } };
      results.set(o.node, { ok: true, text: o.output, receipt: o.metrics.receipt ?? undefined });
    }
    const step = experimentTopology.next(spec, results);
    const c1 = process.cpuUsage();
    const t1 = performance.now();
    await finishExperiment(spec, step.done!, results);
    const finish = performance.now() - t1;
    const fcpu = process.cpuUsage(c1);
    return { items: N, conditions: 4, nodes: out.progress.submitted, workers: agents, verdict: out.verdict, wall_ms: Math.round(wall), finish_ms: +finish.toFixed(1), finish_cpu_ms: +((fcpu.user + fcpu.system) / 1000).toFixed(1), finish_share_pct: +((finish / wall) * 100).toFixed(2) };
  } finally {
    await pool.stop('bench over'); await done; await hub.stop({ killWorkers: true, graceMs: 1000 });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Coverage of the 95% interval of a 0/1 mean at n items, over `reps` seeded samples. */
function coverage(n: number, p: number, reps: number) {
  const r = seededRandom(1234 + Math.round(p * 1000) + n);
  let cp = 0, boot = 0;
  for (let i = 0; i < reps; i++) {
    const xs = Array.from({ length: n }, () => (r() < p ? 1 : 0));
    const a = summarise(xs, i).ci, b = bootstrapCi(xs, i);
    if (a[0] <= p && p <= a[1]) cp++;
    if (b[0] <= p && p <= b[1]) boot++;
  }
  return { n, p, reps, clopper_pearson: +(cp / reps).toFixed(3), percentile_bootstrap: +(boot / reps).toFixed(3) };
}

/** Majority-of-5 at p = 0.6 on letter answers worded four ways: the whole text against the extracted letter. */
function letterVote(items = 2000, k = 5) {
  const r = seededRandom(77);
  const wording = ['The answer is ({L}).', 'Answer: {L}', 'I would go with {L}', 'After some thought: {L}.'];
  const regex = ScorerSchema.parse({ type: 'regex', pattern: '\\b{{expected}}\\b', flags: '' });
  const plurality = (keys: string[]) => {
    const c = new Map<string, number>();
    let best = keys[0]!, n = 0;
    for (const key of keys) { const v = (c.get(key) ?? 0) + 1; c.set(key, v); if (v > n) { n = v; best = key; } }
    return keys.indexOf(best);
  };
  let whole = 0, extracted = 0, first = 0, wholeIsFirst = 0;
  for (let i = 0; i < items; i++) {
    const answers = Array.from({ length: k }, () => { const right = r() < 0.6; return { right, text: wording[Math.floor(r() * 4)]!.replace('{L}', right ? 'B' : 'C') }; });
    const w = plurality(answers.map((a) => voteKey(undefined, a.text)));
    const e = plurality(answers.map((a) => voteKey(regex, a.text)));
    whole += answers[w]!.right ? 1 : 0; extracted += answers[e]!.right ? 1 : 0; first += answers[0]!.right ? 1 : 0; wholeIsFirst += w === 0 ? 1 : 0;
  }
  return { items, k, p: 0.6, binomial_tail: 0.683, agent_a0: +(first / items).toFixed(3), vote_on_whole_text: +(whole / items).toFixed(3), vote_on_extracted_letter: +(extracted / items).toFixed(3), whole_text_vote_took_a0_pct: +((wholeIsFirst / items) * 100).toFixed(1) };
}

const load = () => os.loadavg().map((x) => +x.toFixed(2));
const result: Record<string, unknown> = { host: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version }, load_before: load() };
result.interval_coverage = [0.5, 0.8, 0.95].map((p) => coverage(20, p, 2000));
result.letter_vote = letterVote();
result.scoring_and_statistics = scoringAndStats();
result.runner_only = await runnerOnly();
result.on_hub = await onHub();
const sc = result.scoring_and_statistics as { total_ms: number };
const hub = result.on_hub as { wall_ms: number };
result.overhead_1000x6_pct_of_run = +((sc.total_ms / hub.wall_ms) * 100).toFixed(2);
result.load_after = load();
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.writeFileSync(path.join(ROOT, 'bench/results/experiments.json'), JSON.stringify(result, null, 2) + '\n');
process.stdout.write(JSON.stringify(result, null, 2) + '\n');
process.exit(0);
