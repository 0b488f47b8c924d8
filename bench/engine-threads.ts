/**
 * The batched engine's default thread count (`threads=auto`) against every fixed count 1..cores, on
 * the machine as it is ("quiet") and under a competing load this bench makes itself: as many
 * busy processes as the machine has cores, started after the engine is up (so the default has to
 * notice the load, not only see it at start). Each configuration runs a fresh engine, N agents
 * generating back to back for a fixed time; tokens/s, and the default as a fraction of the best
 * fixed count in the same condition. The load average (`uptime`) is recorded beside every run.
 * Run: `npm run build && node dist/bench/engine-threads.js [MODEL] [AGENTS] [SECONDS]`;
 * appends to bench/results/engine-threads.jsonl.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine } from './proc.js';
import { batchedEngine, busyLoad, runFor } from './engine-load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [model = '/work/shared/models/synth-llama-15M-shape-q8_0.gguf', n = '8', secs = '15'] = process.argv.slice(2);
const N = Number(n);
const MS = Number(secs) * 1000;
const cores = os.availableParallelism();
// The default first and last: the machine drifts during a run, and its mean faces the fixed counts between.
const configs = ['auto', ...Array.from({ length: cores }, (_, i) => String(i + 1)), 'auto'];

interface Row { condition: string; threads: string; tokens_per_s: number; requests: number; load_before: number; load_after: number; engine_threads?: string }
const rows: Row[] = [];

/** The engine log's last word on its threads (`ready: … N thread(s)` and `threads now N`). */
function engineThreads(dir: string): string | undefined {
  const logs = path.join(dir, 'engines');
  const lines = fs.readdirSync(logs).filter((f) => f.endsWith('.log')).flatMap((f) => fs.readFileSync(path.join(logs, f), 'utf8').split('\n'));
  const said = lines.flatMap((l) => { const m = /(\d+) thread\(s\)|threads now (\d+)|threads at exit (\d+; .*)/.exec(l); return m ? [m[1] ?? m[2] ?? m[3]!] : []; });
  return said.length ? said.join('->') : undefined;
}

// The first engine of a run was 1-10% slower than the same configuration last (bench process and page
// cache still warming): a discarded run first, so the default's first place costs it nothing.
{
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-threads-'));
  const set = await batchedEngine(model, N, 'auto', 512, dir);
  await runFor(set, Math.max(3000, MS / 3), 64);
  await set.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}

for (const condition of ['quiet', 'loaded']) {
  for (const threads of configs) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-threads-'));
    const set = await batchedEngine(model, N, threads, 512, dir);
    await runFor(set, 1500, 32); // warm: model pages, first prompts
    const load = condition === 'loaded' ? busyLoad(cores, MS + 10_000) : undefined;
    const load_before = os.loadavg()[0]!;
    const r = await runFor(set, MS, 64);
    load?.stop();
    const load_after = os.loadavg()[0]!;
    await set.stop(); // the engine exits and logs its thread choices
    const row: Row = { condition, threads, tokens_per_s: r.tokens_per_s, requests: r.requests, load_before, load_after, engine_threads: engineThreads(dir) };
    rows.push(row);
    console.error(JSON.stringify(row));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const summary: Record<string, unknown> = {};
for (const condition of ['quiet', 'loaded']) {
  const fixed = rows.filter((r) => r.condition === condition && r.threads !== 'auto');
  const best = fixed.reduce((a, b) => (b.tokens_per_s > a.tokens_per_s ? b : a));
  const autos = rows.filter((r) => r.condition === condition && r.threads === 'auto');
  const auto = { tokens_per_s: Math.round(autos.reduce((a, r) => a + r.tokens_per_s, 0) / autos.length * 10) / 10 };
  summary[condition] = { auto: auto.tokens_per_s, auto_runs: autos.map((r) => r.tokens_per_s), best_fixed: best.tokens_per_s, best_threads: Number(best.threads), auto_vs_best: Math.round(auto.tokens_per_s / best.tokens_per_s * 100) / 100 };
}
const out = { bench: 'engine-threads', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, seconds: MS / 1000, cores, summary, rows };
fs.mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
fs.appendFileSync(path.join(ROOT, 'bench/results/engine-threads.jsonl'), JSON.stringify(out) + '\n');
console.log(JSON.stringify(out, null, 2));
