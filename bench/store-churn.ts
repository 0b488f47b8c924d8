/**
 * The hub's store in its steady state, in one process and without the swarm: the soak's tasks (prompts
 * of 100 B-16 KB, the result their echo) submitted in batches as `POST /tasks` parses them, leased and
 * completed, with the retention horizon archiving the oldest, the journal compacting into its snapshot
 * and the duplicate window's tombstones filling: every part of the hub's memory that grows with
 * finished tasks, and none of the sockets. Prints the process's RSS split by kind (V8 heap used and
 * total, external buffers, the rest: malloc and code) at every 10% and the RSS growth between the
 * 20% and 100% marks, the soak's hub figure without its faults and its network.
 *
 * Run: `npm run build && node dist/bench/store-churn.js [--tasks 150000] [--retain 24h,20000] [--batch 500] [--window 4]`
 * With `--window-ids N` it measures the duplicate window alone instead: N evicted ids remembered (as
 * eviction adds them, 5,000 per batch), its bytes per id (V8 heap and array buffers, after a GC) and
 * the RSS at 20% and 100% of it filled. With `--holder-ids N` the same for a replica holder's evicted
 * ids (worker/gossip/replica.ts): N final entries merged and forgotten, 5,000 at a time, as the hub's
 * eviction reaches a holder.
 * (node flags and MALLOC_* variables go on the command line: the same file measures a before and an after).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { arg, flag, checkArgs } from './args.js';
import { memstat } from './memstat-hook.js';
import { TaskStore } from '../hub/store.js';
import vm from 'node:vm';
import { parseRetain } from '../hub/retention.js';
import { Tombstones } from '../hub/dup-window.js';
import { Replica } from '../worker/gossip/replica.js';
import { soakPrompt } from './soak-prompt.js';

const TASKS = Number(arg('tasks', '150000', 'tasks to run through the store'));
const RETAIN = arg('retain', '24h,20000', 'the retention horizon (AGE,COUNT,BYTES)');
const BATCH = Number(arg('batch', '500', 'tasks per submit'));
const WINDOW = Number(arg('window', '4', 'batches in flight at once'));
const WINDOW_IDS = Number(arg('window-ids', '0', 'measure only the duplicate window, filled with this many ids'));
const HOLDER_IDS = Number(arg('holder-ids', '0', "measure only a replica holder's evicted ids, this many forgotten"));
const GC = flag('gc', 'a full collection before each 10% sample: live bytes, not where the collector happened to be');
const SNAPSHOT = arg('snapshot', '', 'write a heap snapshot to this file at the end');
checkArgs('store-churn', "The hub's store alone: the soak's tasks submitted, completed, archived past the horizon, compacted; RSS by kind at every 10%.");

type Row = { at: number; done: number; hot: number; hot_text_mb: number; rss: number; heap_used: number; heap_total: number; external: number; outside_v8: number; hot_mb: number; snapshot_mb: number; compactions: number; last_compaction_ms?: number };

/** The duplicate window alone: bytes per remembered id and the RSS as it fills (20% and 100%). */
async function windowOnly(n: number): Promise<void> {
  const w = new Tombstones({ ageMs: 24 * 3600_000, count: n });
  let at = Date.now(), offset = 0;
  await idsOnly(n, () => w.size, (from, to) => {
    at++;
    // As eviction adds them: an id parsed from a body (a fresh string), its archive line's place.
    for (let i = from; i < to; i++) { w.add(JSON.parse(`"soak-${i}"`) as string, { file: 1, offset, at, acc: at - 1000 }); offset += 900; }
  });
}

/** A holder's evicted ids alone: final entries merged (as deltas decode: fresh strings), then forgotten. */
async function holderOnly(n: number): Promise<void> {
  const r = new Replica();
  await idsOnly(n, () => r.sizes().forgotten, (from, to) => {
    const ids: string[] = [];
    for (let i = from; i < to; i++) {
      const id = JSON.parse(`"soak-${i}"`) as string;
      r.merge({ id, spec: { id, prompt: 'p' }, seq: i });
      r.merge({ id, result: { worker: 'w-2', attempt: 1, text: 't' } });
      ids.push(id);
    }
    r.forget(ids);
  });
}

/**
 * Fill in runs of 5,000 ids; bytes per id (V8 heap and array buffers after a GC) and the RSS at every 10%.
 * A turn of the event loop after each run and each GC: the finalizers of the replica's shared blobs
 * (replica-pack.ts) run there, as they do in a holder, and their map would count here otherwise.
 */
async function idsOnly(n: number, size: () => number, fill: (from: number, to: number) => void): Promise<void> {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const turn = () => new Promise((res) => setImmediate(res));
  const live = async () => { gc(); await turn(); gc(); await turn(); const m = process.memoryUsage(); return { js: m.heapUsed + m.arrayBuffers, rss: m.rss }; };
  const rssMb = (x: number) => +(x / 2 ** 20).toFixed(1);
  const base = await live();
  const marks: { at: number; rss_mb: number; js_mb: number }[] = [];
  const t0 = performance.now();
  const step = Math.ceil(n / 10);
  for (let i = 0; i < n; ) {
    const to = Math.min(n, i + 5000, (Math.floor(i / step) + 1) * step);
    fill(i, to);
    i = to;
    await turn();
    if (i % step === 0 || i === n) { const m = await live(); marks.push({ at: Math.round((100 * i) / n), rss_mb: rssMb(m.rss), js_mb: rssMb(m.js - base.js) }); }
  }
  const ms = performance.now() - t0;
  const end = await live();
  const m20 = marks.find((x) => x.at >= 20)!, m100 = marks.at(-1)!;
  console.log(JSON.stringify({
    date: new Date().toISOString(), command: `node dist/bench/store-churn.js ${process.argv.slice(2).join(' ')}`, ids: n, remembered: size(),
    bytes_per_id: Math.round((end.js - base.js) / n), rss_bytes_per_id: Math.round((end.rss - base.rss) / n), add_ns_per_id: Math.round((1e6 * ms) / n),
    rss_mb_at20: m20.rss_mb, rss_mb_at100: m100.rss_mb, growth_pct: +((100 * (m100.rss_mb - m20.rss_mb)) / m20.rss_mb).toFixed(1),
    load: os.loadavg().map((x) => +x.toFixed(2)), by_10pct: marks,
  }));
}

async function main(): Promise<void> {
  if (WINDOW_IDS > 0) return windowOnly(WINDOW_IDS);
  if (HOLDER_IDS > 0) return holderOnly(HOLDER_IDS);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-store-churn-'));
  const store = await TaskStore.open(dir, { maxDepth: 1_000_000, leaseMs: 600_000, defaultMaxAttempts: 3 }, { fsyncMs: 0 }, { retain: parseRetain(RETAIN), evictEveryMs: 1000 });
  const w = { id: 'w-1', caps: [] as string[] };
  const hot = () => ['journal.ndjson', 'snapshot.ndjson', 'journal.old.ndjson'].reduce((a, f) => { try { return a + fs.statSync(path.join(dir, f)).size; } catch { return a; } }, 0);
  const rows: Row[] = [];
  let done = 0, maxRss = 0;
  if (GC) v8.setFlagsFromString('--expose-gc');
  const gc = GC ? (vm.runInNewContext('gc') as () => void) : () => {};
  const sample = (): Row => {
    gc();
    const m = memstat() as { rss: number; heap_used: number; heap_total: number; external: number; outside_v8: number };
    maxRss = Math.max(maxRss, m.rss);
    // The hot tasks' prompts and results (one byte a character: the soak's are ASCII): the live heap's bulk.
    let nHot = 0, text = 0;
    for (const r of store.queue.all()) { nHot++; text += r.spec.prompt.length + (r.result?.text.length ?? 0); }
    return { at: Math.round((100 * done) / TASKS), done, hot: nHot, hot_text_mb: +(text / 2 ** 20).toFixed(1), rss: m.rss, heap_used: m.heap_used, heap_total: m.heap_total, external: m.external, outside_v8: m.outside_v8, hot_mb: +(hot() / 2 ** 20).toFixed(1), snapshot_mb: +((store.journalStats?.snapshot_bytes ?? 0) / 2 ** 20).toFixed(1), compactions: store.journalStats?.compactions ?? 0, last_compaction_ms: store.journalStats?.last_compaction_ms };
  };
  const timer = setInterval(() => { maxRss = Math.max(maxRss, process.memoryUsage().rss / 2 ** 20); }, 500);
  const t0 = performance.now();
  const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
  const cpu0 = cpu();
  let cpu20: number | undefined, done20 = 0;
  const batch = async (from: number, n: number): Promise<void> => {
    // As the control API gets them: one JSON body parsed into fresh strings.
    const body = JSON.stringify({ tasks: Array.from({ length: n }, (_, k) => ({ id: `soak-${from + k}`, prompt: soakPrompt(from + k) })) });
    await store.submitMany((JSON.parse(body) as { tasks: unknown[] }).tasks);
    const finishing: Promise<unknown>[] = [];
    for (let r = store.lease(w); r; r = store.lease(w)) {
      // As a worker's TASK_RES decodes: a fresh string per result.
      const res = JSON.parse(JSON.stringify({ text: `echo: ${r.spec.prompt}` })) as { text: string };
      finishing.push(store.complete(r.id, { text: res.text, worker: w.id, attempt: 1 }));
    }
    await Promise.all(finishing);
    done += n;
  };
  const inflight = new Set<Promise<void>>();
  let next = 0, mark = 10;
  while (next < TASKS || inflight.size) {
    while (next < TASKS && inflight.size < WINDOW) {
      const p = batch(next, Math.min(BATCH, TASKS - next)).finally(() => inflight.delete(p));
      inflight.add(p);
      next += BATCH;
    }
    await Promise.race(inflight);
    if ((100 * done) / TASKS >= mark) { rows.push(sample()); mark += 10; }
    if (cpu20 === undefined && done >= 0.2 * TASKS) { cpu20 = cpu(); done20 = done; }
  }
  clearInterval(timer);
  const wall = (performance.now() - t0) / 1000;
  const at20 = rows.find((x) => x.at >= 20)!, at100 = rows.at(-1)!;
  const mean = (from: number, to: number) => { const xs = rows.filter((x) => x.at >= from && x.at <= to); return +(xs.reduce((a, x) => a + x.rss, 0) / xs.length).toFixed(1); };
  console.log(JSON.stringify({
    date: new Date().toISOString(), command: `node ${process.execArgv.join(' ')} dist/bench/store-churn.js ${process.argv.slice(2).join(' ')}`.replace(/\s+/g, ' ').trim(),
    env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('MALLOC_'))),
    tasks: TASKS, retain: RETAIN, wall_s: +wall.toFixed(1), tasks_per_s: Math.round(TASKS / wall), hot: store.retention.hot_finished, remembered_ids: store.retention.remembered_ids,
    cpu_us_per_task: Math.round((1e6 * (cpu() - cpu0)) / TASKS), cpu_us_per_task_20_100: Math.round((1e6 * (cpu() - cpu20!)) / (done - done20)),
    rss_mb_at20: at20.rss, rss_mb_at100: at100.rss, growth_pct: +((100 * (at100.rss - at20.rss)) / at20.rss).toFixed(1), max_rss_mb: +maxRss.toFixed(1),
    mean_rss_20_40: mean(20, 40), mean_rss_80_100: mean(80, 100), load: os.loadavg().map((x) => +x.toFixed(2)), by_10pct: rows,
  }));
  if (SNAPSHOT) v8.writeHeapSnapshot(SNAPSHOT);
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

void main().then(() => process.exit(0));
