/**
 * The batched engine alone (no hub, no worker processes) under the swarm-vs-server load: N drivers in
 * this process on one engine, R requests of T tokens each, and the engine's CPU seconds, beside a bare
 * llama-server -np N at the same thread count. Separates the engine's cost from the swarm's.
 * Run: `node dist/bench/batched-load.js MODEL N R THREADS [k=v,…]` (the last: more driver options, e.g.
 * `kv_unified=0`); appends to bench/results/batched.jsonl.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchedDriver } from '../drivers/batched/index.js';
import { machine } from './proc.js';
import { runLoad, sharedServer, type EngineSet } from './engine-load.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [model = '/tmp/swarm-bench-models/synth-llama-110M-shape-q8_0.gguf', n = '8', r = '3', threads = '1', extra = ''] = process.argv.slice(2);
const more = Object.fromEntries(extra.split(',').filter(Boolean).map((kv) => kv.split('=', 2) as [string, string]));
const N = Number(n), R = Number(r);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-bl-'));
const agents = Array.from({ length: N }, () => new BatchedDriver({ name: 'batched', model, options: { dir, sequences: n, ctx: '512', threads, ...more } }));
await Promise.all(agents.map((a) => a.start()));
const set: EngineSet = { mode: 'batched', agents, pids: () => [agents[0]!.enginePid()!], stop: async () => { await Promise.all(agents.map((a) => a.stop())); } } as unknown as EngineSet;
await runLoad(set, 1, 64);
const l1 = os.loadavg()[0];
const batched = await runLoad(set, R, 64);
await set.stop();
fs.rmSync(dir, { recursive: true, force: true });
const bare = await sharedServer(model, N, Number(threads), 512);
await runLoad(bare, 1, 64);
const l2 = os.loadavg()[0];
const b = await runLoad(bare, R, 64);
await bare.stop();
const out = { bench: 'batched-load', machine: machine(), date: new Date().toISOString(), model: path.basename(model), agents: N, requests: R, threads: Number(threads), options: more,
  batched: { ...batched, load_avg_1m_before: l1 }, bare: { ...b, load_avg_1m_before: l2 },
  cpu_efficiency_vs_bare: +(batched.tokens_per_cpu_s / b.tokens_per_cpu_s).toFixed(2), wall_vs_bare: +(batched.tokens_per_s / b.tokens_per_s).toFixed(2) };
fs.appendFileSync(path.join(ROOT, 'bench/results/batched.jsonl'), JSON.stringify(out) + '\n');
console.log(JSON.stringify(out, null, 2));
process.exit(0);
