/**
 * A measurement hook for benches: loaded into every process a swarm starts through
 * `SWARM_NODE_ARGS="--import <dist>/bench/memstat-hook.js"` with `SWARM_BENCH_MEMSTAT_DIR` set, it
 * writes `<dir>/<pid>.json` every 2 s: `process.memoryUsage()`, V8's heap spaces and the kernel's
 * anonymous/file split (/proc/self/smaps_rollup), so a bench can tell the JS heap's live bytes from
 * its headroom, from buffers outside it and from malloc's share of the RSS.
 */
import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

const dir = process.env.SWARM_BENCH_MEMSTAT_DIR;
const MB = 2 ** 20;
const mb = (n: number) => +(n / MB).toFixed(1);

/** The memory of this process now, in MB. */
export function memstat(): Record<string, unknown> {
  const m = process.memoryUsage();
  const spaces: Record<string, { size: number; used: number }> = {};
  for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name.replace(/_space$/, '')] = { size: mb(s.space_size), used: mb(s.space_used_size) };
  const h = v8.getHeapStatistics();
  let anon = 0, file = 0;
  try {
    const t = fs.readFileSync('/proc/self/smaps_rollup', 'utf8');
    anon = Number(/^Anonymous:\s+(\d+) kB/m.exec(t)?.[1] ?? 0) * 1024;
    file = Number(/^Rss:\s+(\d+) kB/m.exec(t)?.[1] ?? 0) * 1024 - anon;
  } catch { /* not Linux */ }
  return {
    pid: process.pid, t: Date.now(), argv: process.argv.slice(2, 6).join(' '),
    rss: mb(m.rss), heap_total: mb(m.heapTotal), heap_used: mb(m.heapUsed), external: mb(m.external), array_buffers: mb(m.arrayBuffers),
    malloced: mb(h.malloced_memory), peak_malloced: mb(h.peak_malloced_memory), anon: mb(anon), file: mb(file),
    // What the RSS holds beyond V8's heap and its external bytes: malloc's arenas, code, stacks.
    outside_v8: mb(m.rss - m.heapTotal - m.external), spaces,
  };
}

/**
 * Since the last call: the event loop's delay (max, p99, p50, ms) and the GC's pauses (count, total, max, ms):
 * what keeps a process from reading its sockets (a replica holder falling behind the hub's feed).
 */
const eld = monitorEventLoopDelay({ resolution: 10 });
eld.enable();
let gc = { n: 0, ms: 0, max: 0, major_ms: 0 };
new PerformanceObserver((l) => {
  for (const e of l.getEntries()) {
    gc.n++; gc.ms += e.duration; gc.max = Math.max(gc.max, e.duration);
    // Mark-sweep-compact and its incremental steps, apart from the young generation's scavenges.
    const kind = (e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0;
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR || kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) gc.major_ms += e.duration;
  }
}).observe({ entryTypes: ['gc'] });
function pauses(): Record<string, number> {
  const out = { eld_max_ms: +(eld.max / 1e6).toFixed(1), eld_p99_ms: +(eld.percentile(99) / 1e6).toFixed(1), eld_p50_ms: +(eld.percentile(50) / 1e6).toFixed(1), gc_n: gc.n, gc_ms: +gc.ms.toFixed(1), gc_max_ms: +gc.max.toFixed(1), gc_major_ms: +gc.major_ms.toFixed(1), cpu_s: +((process.cpuUsage().user + process.cpuUsage().system) / 1e6).toFixed(2) };
  eld.reset();
  gc = { n: 0, ms: 0, max: 0, major_ms: 0 };
  return out;
}

if (dir) {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${process.pid}.json`);
  // Each sample also as a line of a history (the loop's delay and the GC's pauses are per interval).
  const hist = path.join(dir, `${process.pid}.jsonl`);
  const write = () => { try { const m = { ...memstat(), ...pauses() }; fs.writeFileSync(file, JSON.stringify(m)); fs.appendFileSync(hist, JSON.stringify(m) + '\n'); } catch { /* the bench removed the dir */ } };
  setInterval(write, 2000).unref();
  // A heap snapshot on demand (`kill -USR2 <pid>`): written beside the stats, named by pid and time.
  process.on('SIGUSR2', () => { v8.writeHeapSnapshot(path.join(dir, `${process.pid}-${Date.now()}.heapsnapshot`)); });
}
