/**
 * What a finished task holds in the hub, against what the `--retain` bytes bound counts for it
 * (hub/retention-bytes.ts `taskBytes`): for each prompt size, N tasks run through a journaled
 * TaskStore (prompt as submitted, the result its echo), then the live JS bytes (V8 heap used plus
 * array buffers, after a full collection) per task: as the hub holds them while it runs, and again
 * after a restart (replayed from the snapshot and the journal, lines unparsed). A size of 0 gives
 * the record's own bytes (RECORD_BYTES); the slope over the sizes, the bytes held per byte counted;
 * `replay_count_cpu_ms`, the CPU that measuring every replayed task from its lines takes (part of
 * the open, `open_cpu_ms`).
 *
 * Run: `npm run build && node dist/bench/hot-bytes.js [--tasks 20000] [--sizes 1,1000,4000,16000]`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { arg, checkArgs } from './args.js';
import { TaskStore } from '../hub/store.js';
import { taskBytes } from '../hub/retention-bytes.js';

const TASKS = Number(arg('tasks', '20000', 'finished tasks held per size'));
const SIZES = arg('sizes', '1,1000,4000,16000', 'prompt sizes in characters (the result is 6 more)').split(',').map(Number);
checkArgs('hot-bytes', 'Bytes a finished task holds in the hub (live and replayed) against what the --retain bytes bound counts.');

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const turn = () => new Promise((r) => setImmediate(r));
const live = async () => { gc(); await turn(); gc(); await turn(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
const q = { maxDepth: 10_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 };
const retain = { retain: { ageMs: 3600_000, count: 10_000_000, bytes: 2 ** 40 }, evictEveryMs: 3600_000 };

async function one(size: number): Promise<Record<string, number>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-hot-bytes-'));
  try {
    const base = await live();
    const s = await TaskStore.open(dir, q, { fsyncMs: 0 }, retain);
    const w = { id: 'w-1', caps: [] as string[] };
    for (let from = 0; from < TASKS; from += 500) {
      // As the control API and a worker's TASK_RES give them: fresh strings parsed from JSON.
      const body = JSON.stringify({ tasks: Array.from({ length: Math.min(500, TASKS - from) }, (_, k) => ({ id: `hb-${from + k}`, prompt: `${from + k} `.padEnd(size, 'p').slice(0, Math.max(size, 1)) })) });
      await s.submitMany((JSON.parse(body) as { tasks: unknown[] }).tasks);
      const done: Promise<unknown>[] = [];
      for (let r = s.lease(w); r; r = s.lease(w)) done.push(s.complete(r.id, { text: (JSON.parse(JSON.stringify({ t: `echo: ${r.spec.prompt}` })) as { t: string }).t, worker: w.id, attempt: 1 }));
      await Promise.all(done);
    }
    const counted = s.retention.hot_bytes;
    const held = (await live()) - base;
    await s.compact();
    await s.close();
    const base2 = await live();
    const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
    const c0 = cpu();
    const s2 = await TaskStore.open(dir, q, { fsyncMs: 0 }, { ...retain, settleAfterOpenMs: 3600_000 });
    const openCpu = cpu() - c0;
    const counted2 = s2.retention.hot_bytes;
    const held2 = (await live()) - base2;
    // What counting costs a restart: every hot task measured from its unparsed lines, as the open does.
    const c1 = cpu();
    let n = 0;
    for (const r of s2.queue.all()) n += taskBytes(r);
    const countMs = cpu() - c1;
    await s2.close();
    return { size, counted_per_task: Math.round(counted / TASKS), held_per_task: Math.round(held / TASKS), replayed_counted_per_task: Math.round(counted2 / TASKS), replayed_held_per_task: Math.round(held2 / TASKS), open_cpu_ms: Math.round(openCpu), replay_count_cpu_ms: +countMs.toFixed(1), replay_count_mb: +(n / 2 ** 20).toFixed(1) };
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

const rows: Record<string, number>[] = [];
for (const size of SIZES) rows.push(await one(size));
const [a, b] = [rows[0]!, rows.at(-1)!];
const slope = (k: string) => +((b[k]! - a[k]!) / (b.counted_per_task! - a.counted_per_task!)).toFixed(3);
console.log(JSON.stringify({
  date: new Date().toISOString(), command: `node dist/bench/hot-bytes.js ${process.argv.slice(2).join(' ')}`.trim(), tasks: TASKS, load: os.loadavg().map((x) => +x.toFixed(2)),
  held_per_counted_byte: slope('held_per_task'), replayed_held_per_counted_byte: slope('replayed_held_per_task'), rows,
}));
