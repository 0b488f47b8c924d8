/**
 * Validation cost per frame: TASK_REQ and TASK_RES frames through protocol/validate.ts, and tasks
 * through TaskStore.parse (the hub's submit), in ns each. `--against DIR` loads the same two modules
 * from another build (a `dist` folder of an older commit) and runs both in alternating rounds, so the
 * ratio comes from one run at one load.
 *   node dist/bench/validate.js [--against /path/to/old/dist] [--rounds 40] [--n 2000] [--out bench/results/validate.jsonl]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { arg, checkArgs } from './args.js';
import { machine } from './proc.js';

type Validate = (v: unknown) => { ok: boolean };
type Parse = (v: unknown, i?: number) => unknown;
interface Build { name: string; validate: Validate; parse: Parse }

const ROUNDS = Number(arg('rounds', '40'));
const N = Number(arg('n', '2000'));
const against = arg('against', '');
const out = arg('out', '');
checkArgs('validate', 'Validation cost per frame: TASK_REQ and TASK_RES through protocol/validate.ts and tasks through TaskStore.parse, in ns each.');

async function load(name: string, dist: string): Promise<Build> {
  const p = (f: string): string => pathToFileURL(path.join(dist, f)).href;
  const { validate } = await import(p('protocol/validate.js')) as { validate: Validate };
  const { TaskStore } = await import(p('hub/store.js')) as { TaskStore: { parse: Parse } };
  return { name, validate, parse: (v, i) => TaskStore.parse(v, i) };
}

const prompt = 'Summarise the following paragraph in one sentence. '.repeat(4);
/** Frames as a hub and a worker send them (the hub fills stop and attempt; a partial carries a few tokens). */
const LINES = {
  TASK_REQ: JSON.stringify({ ver: 1, id: 'm-12345', type: 'TASK_REQ', src: 'hub', dst: 'w-7', payload: { task_id: 't-000123', prompt, stop: ['\n\n'], attempt: 1, max_tokens: 128, temperature: 0.7, stream: true } }),
  TASK_RES: JSON.stringify({ ver: 1, id: 'm-54321', type: 'TASK_RES', src: 'w-7', dst: 'hub', re: 'm-12345', payload: { task_id: 't-000123', text: ' the quick brown', done: false, seq: 3 } }),
  'TASK_RES final': JSON.stringify({ ver: 1, id: 'm-54322', type: 'TASK_RES', src: 'w-7', dst: 'hub', re: 'm-12345', payload: { task_id: 't-000123', text: '', done: true, seq: 9, receipt: { started_at: 1_700_000_000_000, finished_at: 1_700_000_000_900, duration_ms: 900, ttft_ms: 80, tokens_in: 40, tokens_out: 64, tokens_per_s: 71.1, worker: 'w-7', driver: 'embedded', attempt: 1 } } }),
  'task (submit)': JSON.stringify({ id: 'job-000123', prompt, max_tokens: 128, temperature: 0.7, meta: { run: 'r1', node: 'summarise' } }),
} as const;

/** ns per call over N fresh decoded values (decoding is outside the clock: a check may fill in or drop keys). */
function time(b: Build, kind: keyof typeof LINES): number {
  const values = Array.from({ length: N }, () => JSON.parse(LINES[kind]) as unknown);
  const t0 = process.hrtime.bigint();
  if (kind === 'task (submit)') for (let i = 0; i < N; i++) b.parse(values[i], i);
  else for (let i = 0; i < N; i++) if (!b.validate(values[i]).ok) throw new Error(`${b.name}: ${kind} refused`);
  return Number(process.hrtime.bigint() - t0) / N;
}

const builds = [await load('this build', path.resolve(path.dirname(new URL(import.meta.url).pathname), '..'))];
if (against) builds.push(await load(against, path.resolve(against)));
const best: Record<string, Record<string, number>> = {};
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const b of r % 2 ? [...builds].reverse() : builds) {
    for (const kind of Object.keys(LINES) as (keyof typeof LINES)[]) {
      const ns = time(b, kind);
      // Round 0 warms the JIT and is not counted; the best of the rest is the figure: on a loaded
      // machine, noise only adds, and many short rounds give the best a chance to be quiet.
      if (r > 0) (best[b.name] ??= {})[kind] = Math.min(best[b.name]?.[kind] ?? Infinity, ns);
    }
  }
}
const load1 = os.loadavg().map((x) => x.toFixed(2)).join(' ');
const row: Record<string, unknown> = { date: new Date().toISOString(), machine: machine(), load: load1, n: N, rounds: ROUNDS, ns: best };
for (const [name, ns] of Object.entries(best)) {
  process.stdout.write(`${name}: ${Object.entries(ns).map(([k, v]) => `${k} ${v.toFixed(0)} ns`).join(', ')}\n`);
}
if (against) {
  const ratio = Object.fromEntries(Object.keys(LINES).map((k) => [k, +(best[against]![k]! / best['this build']![k]!).toFixed(2)]));
  row.against = against;
  row.ratio = ratio;
  process.stdout.write(`${against} / this build: ${Object.entries(ratio).map(([k, v]) => `${k} ${v}x`).join(', ')}\n`);
}
process.stdout.write(`load ${load1}\n`);
if (out) fs.appendFileSync(out, JSON.stringify(row) + '\n');
