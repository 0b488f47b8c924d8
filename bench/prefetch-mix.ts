/**
 * Prefetch against head-of-line blocking: 1,000 echo tasks on 8 workers (`token_ms=1`), 5% of them
 * long (a 200-word prompt, ~0.25 s) among short ones (~2 ms), in a fixed random order. Each round runs
 * the hub with prefetch (the default, 5 ms) and without (`--prefetch-below-ms 0`), alternating, and
 * reports the whole command's wall time, how many queued tasks workers gave back, and the checks that
 * must hold either way: every task done, once, on its first attempt.
 *
 * Run: `node dist/bench/prefetch-mix.js [--rounds 2] [--tasks 1000] [--workers 8] [--failover]`.
 * Appends one line per run to bench/results/prefetch-mix.jsonl (or --out).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, CLI, arg, flag, checkArgs } from './args.js';
import { machine } from './proc.js';

const ROUNDS = Number(arg('rounds', '2'));
const TASKS = Number(arg('tasks', '1000'));
const WORKERS = Number(arg('workers', '8'));
const FAILOVER = flag('failover');
const OUT = arg('out', path.join(ROOT, 'bench/results/prefetch-mix.jsonl'));
checkArgs('prefetch-mix', 'Prefetch against head-of-line blocking: echo tasks, 5% long among short ones, the hub with and without prefetch, alternating.');

function swarm(args: string[], dir: string, input?: string): string {
  const r = spawnSync(process.execPath, [CLI, ...args, '--state-dir', dir], { encoding: 'utf8', input, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`swarm ${args[0]}: exit ${r.status}: ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

/** A fixed pseudo-random mix (the same every run): 1 in 20 tasks long. */
function tasks(): string {
  let s = 7;
  const rand = () => { s = (s * 1103515245 + 12345) % 2147483648; return s / 2147483648; };
  return Array.from({ length: TASKS }, (_, i) => JSON.stringify({ id: `m-${i}`, prompt: rand() < 0.05 ? 'w '.repeat(200).trim() : 'x' })).join('\n') + '\n';
}

function once(prefetchMs: number, round: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-prefetch-'));
  try {
    swarm(['up', '-n', String(WORKERS), '--driver', 'echo', '--driver-opt', 'token_ms=1', '--detach', '--prefetch-below-ms', String(prefetchMs), ...(FAILOVER ? [] : ['--no-failover'])], dir);
    const t0 = performance.now();
    const out = JSON.parse(swarm(['submit', '--file', '-', '--wait', '--json'], dir, tasks())) as { complete: boolean; tasks: { id: string; state: string; attempts: number }[] };
    const ms = performance.now() - t0;
    const results = new Map<string, number>();
    for (const line of fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').split('\n')) {
      if (!line.includes('"t":"result"')) continue;
      const id = (JSON.parse(line) as { id: string }).id;
      results.set(id, (results.get(id) ?? 0) + 1);
    }
    const logs = fs.readdirSync(path.join(dir, 'logs')).map((f) => fs.readFileSync(path.join(dir, 'logs', f), 'utf8')).join('\n');
    return {
      date: new Date().toISOString(), machine: machine(), prefetch_below_ms: prefetchMs, failover: FAILOVER, tasks: TASKS, workers: WORKERS, round,
      command_ms: Math.round(ms), complete: out.complete,
      done: out.tasks.filter((t) => t.state === 'done').length,
      not_first_attempt: out.tasks.filter((t) => t.attempts !== 1).length,
      recorded_twice: [...results.values()].filter((n) => n > 1).length,
      given_back_events: (logs.match(/given back: a long task/g) ?? []).length,
      load_avg_1m: os.loadavg()[0],
    };
  } finally {
    try { swarm(['down'], dir); } catch { /* already down */ }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (let round = 0; round < ROUNDS; round++) {
  for (const prefetchMs of [5, 0]) {
    const r = once(prefetchMs, round);
    console.log(JSON.stringify(r));
    fs.appendFileSync(OUT, JSON.stringify(r) + '\n');
  }
}
