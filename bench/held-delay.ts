/**
 * The event-loop delay a restarted hub's digest comparison costs (hub/replicate-held.ts): a state of
 * `--tasks` finished tasks, reopened with a horizon of `--hot`, so the rest are evicted by this hub
 * process (the read-back case: each one an archive pread); a holder's digest that differs in every
 * bucket (the worst case: every evicted task is read back). Compared in one turn (as the hub did)
 * and a slice at a time, with a 1 ms timer beside it: its longest gap is how long the hub answered
 * no one.
 * Run: `npm run build && node dist/bench/held-delay.js [--tasks 150000] [--hot 100000]`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TaskStore } from '../hub/store.js';
import { parseRetain } from '../hub/retention.js';
import { Versions } from '../hub/replicate-resume.js';
import { heldBy, heldByAsync, readBack, type HeldInput } from '../hub/replicate-held.js';
import { arg, checkArgs, flag } from './args.js';

const TASKS = Number(arg('tasks', '150000', 'finished tasks in the state'));
const HOT = Number(arg('hot', '100000', 'the horizon the state is reopened with (the rest are evicted and read back)'));
const QUICK = flag('quick', 'the idle floor and the batched comparison only');
checkArgs('held-delay', "The event-loop delay of a restarted hub's digest comparison with a holder that differs in every bucket.");
const Q = { maxDepth: 1_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 };
const J = { fsyncMs: 0 };

async function main(): Promise<void> {
  const total = TASKS, hot = HOT;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-held-'));
  try {
    const s0 = await TaskStore.open(dir, Q, J, { retain: parseRetain(`24h,${total * 2}`), evictEveryMs: 3600_000 });
    const w = { id: 'w', caps: [] as string[] };
    const pad = 'x'.repeat(180);
    for (let i = 0; i < total; i += 5000) {
      await s0.submitMany(Array.from({ length: 5000 }, (_, k) => ({ id: `t-${i + k}`, prompt: `prompt ${i + k} ${pad}` })));
      const done: Promise<unknown>[] = [];
      for (let k = 0; k < 5000; k++) { const r = s0.lease(w); if (r) done.push(s0.complete(r.id, { text: `result ${r.id}`, worker: 'w', attempt: 1 })); }
      await Promise.all(done);
    }
    await s0.close();
    const s = await TaskStore.open(dir, Q, J, { retain: parseRetain(`24h,${hot}`), evictEveryMs: 3600_000 });
    const versions = new Versions();
    s.subscribe((e) => { if (e.type === 'evicted') versions.evicted(e.ids); });
    while (s.queue.counts().done > hot) if (!(await s.evict())) break;
    const ids = versions.evictedAll() ?? [];
    const n = 4096;
    // A digest that differs in every bucket: every evicted task is read back.
    const have = { n, h: Array.from({ length: n }, (_, i) => (i * 2654435761) >>> 0) };
    const input = (batch = false): HeldInput => ({ have, all: s.queue.all(), versions, evicted: { ids, lookup: (id) => (s.queue.get(id) ? undefined : s.lookup(id)), ...(batch ? { readMany: readBack(s) } : {}) } });
    const measure = async (run: () => Promise<unknown>) => {
      let last = performance.now(), maxGap = 0, ticks = 0;
      const timer = setInterval(() => { const now = performance.now(); maxGap = Math.max(maxGap, now - last); last = now; ticks++; }, 1);
      await new Promise((r) => setTimeout(r, 20));
      last = performance.now(); maxGap = 0; ticks = 0;
      const t0 = performance.now();
      await run();
      const wall = performance.now() - t0;
      await new Promise((r) => setTimeout(r, 5));
      clearInterval(timer);
      return { wall_ms: Math.round(wall), max_loop_gap_ms: Math.round(maxGap), timer_ticks: ticks };
    };
    // The floor: the same timer while this process does nothing for 2 s (on a loaded host the timer is late by itself).
    const idle = await measure(() => new Promise((r) => setTimeout(r, 2000)));
    if (QUICK) { console.log(JSON.stringify({ idle, batched: await measure(() => heldByAsync(input(true))) })); await s.close(); return; }
    const load = os.loadavg().map((x) => +x.toFixed(1));
    const oneTurn = await measure(async () => heldBy(input()));
    const sliced = await measure(() => heldByAsync(input()));
    const batched = await measure(() => heldByAsync(input(true)));
    // The same answer all three ways.
    const [a, b] = [heldBy(input()), await heldByAsync(input(true))];
    if (a?.same !== b?.same || a?.withEvicted !== b?.withEvicted) throw new Error(`answers differ: ${a?.same}/${a?.withEvicted} vs ${b?.same}/${b?.withEvicted}`);
    await s.close();
    console.log(JSON.stringify({ command: `node dist/bench/held-delay.js ${process.argv.slice(2).join(' ')}`.trim(), tasks: total, hot: s.queue.counts().done, evicted_read_back: ids.length, load, idle_2s: idle, one_turn_pread_each: oneTurn, sliced_pread_each: sliced, sliced_batched_reads: batched }, null, 2));
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

await main();
