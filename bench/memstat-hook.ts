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

if (dir) {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${process.pid}.json`);
  const write = () => { try { fs.writeFileSync(file, JSON.stringify(memstat())); } catch { /* the bench removed the dir */ } };
  setInterval(write, 2000).unref();
  // A heap snapshot on demand (`kill -USR2 <pid>`): written beside the stats, named by pid and time.
  process.on('SIGUSR2', () => { v8.writeHeapSnapshot(path.join(dir, `${process.pid}-${Date.now()}.heapsnapshot`)); });
}
