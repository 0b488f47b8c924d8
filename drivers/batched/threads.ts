/**
 * How many threads the batched engine decodes with when none is given (`threads=auto`).
 *
 * llama.cpp's threads spin at the barriers between a graph's operations. When another runnable
 * process takes one of their cores, the others spin until the descheduled one gets a slice back, at
 * every barrier: on 2 cores at load 7-11, two threads gave 2.5-5.5 tokens/s where one gave 972. So
 * the count is chosen twice: at start from the CPU share that is free (cgroup quota, affinity, the
 * runnable processes and steal time of the moment), and then while it runs, by measuring (ThreadTuner).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cgroupCpuReader, cpuCgroup, quotaHeadroom } from './cgroup-cpu.js';

/**
 * The CPUs this process may use: its affinity (os.availableParallelism) capped by the CPU quota of
 * its own cgroup or of any cgroup above it (cgroup-cpu.ts), rounded up. `root` holds the proc/ and
 * sys/ to read ('/': this machine's).
 */
export function cpuLimit(root = '/', parallelism = os.availableParallelism()): number {
  const quota = cpuCgroup(root)?.quota ?? Infinity;
  return Number.isFinite(quota) && quota > 0 ? Math.min(parallelism, Math.max(1, Math.ceil(quota))) : parallelism;
}

/**
 * The most threads the engine decodes with where none is given: the CPUs it may use, less one where
 * there are four or more. The swarm's hub and worker, and the engine's own event loop, wake at every
 * task's turn; with a decode thread on every core each wake-up takes a core from a thread that all the
 * others then wait for at the next barrier. On a quiet 16-core Xeon (docs/performance.md), six rows
 * of the engine started at 16 threads: 16 ran 168-2,563 tokens/s in its windows where 8 then ran
 * 1,096-4,422, lower in every row, and 16 was left for 7 or 8 threads even where 15 would have won;
 * a bare llama-server, with nothing of its own beside it, ran 0.73-1.27x at 16 what it ran at 8.
 */
export function threadCap(limit = cpuLimit()): number { return limit >= 4 ? limit - 1 : limit; }

/** The machine's CPU time so far (idle with iowait, stolen, all) and its runnable processes, from /proc/stat; undefined where it is not readable. */
interface CpuSample { idle: number; steal: number; total: number; runnable: number }

function sample(root: string): CpuSample | undefined {
  try {
    const stat = fs.readFileSync(path.join(root, 'proc/stat'), 'utf8');
    const cpu = stat.slice(0, stat.indexOf('\n')).trim().split(/\s+/).slice(1).map(Number);
    const running = /^procs_running\s+(\d+)/m.exec(stat);
    return { idle: (cpu[3] ?? 0) + (cpu[4] ?? 0), steal: cpu[7] ?? 0, total: cpu.reduce((a, b) => a + b, 0), runnable: running ? Number(running[1]) : 0 };
  } catch { return undefined; }
}

/**
 * Threads to start with: the CPUs this process may use, less those other runnable processes hold
 * now (procs_running sampled over `ms`, our own sampling thread not counted), less the share stolen
 * by the hypervisor. At least 1. The tuner corrects it as the load changes.
 *
 * Under a cgroup quota the machine's other processes mostly run outside it, on CPUs the quota does
 * not give us anyway: they count against the machine's CPUs (`parallelism`), not against the quota;
 * what the quota leaves is its headroom over the same `ms` (quota less the cgroup's usage, none
 * while it is throttled), rounded up as the quota is in cpuLimit.
 */
export async function startThreads(limit = cpuLimit(), ms = 120, root = '/', parallelism = os.availableParallelism()): Promise<number> {
  if (limit <= 1) return 1;
  const group = cgroupCpuReader(root);
  const g0 = group?.();
  const a = sample(root);
  if (!a && !group) return limit;
  let runnable = 0;
  const n = 4;
  for (let i = 0; i < n; i++) {
    await new Promise((r) => setTimeout(r, ms / n));
    runnable += Math.max(0, (sample(root)?.runnable ?? 1) - 1);
  }
  const b = sample(root);
  const steal = a && b && b.total > a.total ? (b.steal - a.steal) / (b.total - a.total) : 0;
  const host = a ? (group ? Math.max(limit, parallelism) : limit) * (1 - steal) - runnable / n : limit;
  const headroom = group && g0 ? quotaHeadroom(group.group, g0, group()) : undefined;
  const quota = headroom === undefined ? limit : Math.ceil(headroom - 0.25);
  return Math.max(1, Math.min(limit, Math.floor(host + 0.25), quota));
}

/** The machine's idle (with iowait) and total CPU time so far, from /proc/stat's first line; undefined where it is not readable. */
export function cpuTimes(root = '/'): { idle: number; total: number } | undefined {
  const s = sample(root);
  return s && { idle: s.idle, total: s.total };
}

/**
 * Cores left idle to us since the previous call, or on the first call since this was made: the
 * machine's idle and iowait time over all time, scaled by the CPUs, and under a cgroup quota no more
 * than the quota left unused (`group`, cgroup-cpu.ts: quota less the cgroup's usage rate, none while
 * it was throttled; a 4-CPU quota on a 16-core host can be throttled while the host idles 10 cores).
 * Undefined where neither is readable. The first interval starts here: were the first call
 * unanswered, the tuner's first probe of more threads would go unguarded, and on a busy machine that
 * one probe's steps (two threads spinning against the load: 12 tok/s where one thread did 400) cost
 * a 10 s run a third of its tokens. Each call reads /proc/stat and, under a quota, each quota level's
 * cpu.stat (and v1 cpuacct.usage); null `group`: the machine's reading only.
 */
export function idleCores(read: () => { idle: number; total: number } | undefined = cpuTimes, cpus = os.cpus().length,
  group: ReturnType<typeof cgroupCpuReader> | null = cgroupCpuReader()): () => number | undefined {
  let last = read();
  let lastGroup = group?.();
  return () => {
    const now = read();
    const g = group?.();
    const prev = last, prevGroup = lastGroup;
    if (now) last = now;
    if (g) lastGroup = g;
    const host = now && prev && now.total > prev.total ? (now.idle - prev.idle) / (now.total - prev.total) * cpus : undefined;
    const quota = group && g && prevGroup ? quotaHeadroom(group.group, prevGroup, g) : undefined;
    return host === undefined ? quota : quota === undefined ? host : Math.min(host, quota);
  };
}

/** Whether `threads` decode threads leave room for spareCore ever to say yes: four CPUs or more, one beside them. */
export function mayOverlap(threads: number, limit = cpuLimit()): boolean { return limit >= 4 && threads < limit; }

/**
 * Whether a core idles beside the engine's decode threads, so that its main thread's work between two
 * steps (a chat's text, the sockets) can run beside the next decode instead (step-loop.ts, overlap):
 * never on fewer than four CPUs (there the hub's and workers' turns take what a core idles; on 2 shared
 * vCPUs it did not show a gain) nor with a decode thread on every CPU; else re-read at most every
 * `everyMs`, on once a whole core idled, off below half of one (the main thread's own share of that
 * core must not switch it off again). From four CPUs up the tuner's counts all leave a CPU
 * (threadCap), so every count it compares may overlap alike. On a busy machine it stays off: the
 * overlapping step's hand-offs between threads each wait for a time slice there, which the step on
 * the main thread does not.
 */
export function spareCore(threads: () => number, limit = cpuLimit(), free = idleCores(), everyMs = 500, now = () => performance.now()): () => boolean {
  let on = false;
  let at = -Infinity;
  return () => {
    if (!mayOverlap(threads(), limit)) return (on = false);
    const t = now();
    if (t - at < everyMs) return on;
    at = t;
    const idle = free();
    on = idle !== undefined && (on ? idle >= 0.5 : idle >= 1);
    return on;
  };
}

/** A decode step's threads and what it took: what the tuner learns from. */
export interface ThreadTunerOptions {
  /** The most threads it tries (cpuLimit()). */
  max: number;
  /** Where it starts (startThreads()). */
  start: number;
  /** Decode time measured before a thread count's rate is taken (ms). */
  windowMs?: number;
  /** Decode time a probe of another count runs for, at most (ms). */
  probeMs?: number;
  /** First and longest wait between probes (ms); each probe that loses doubles it. */
  probeEveryMs?: number;
  probeEveryMaxMs?: number;
  now?: () => number;
  /**
   * Cores the machine left idle since the last call (idleCores()); undefined: not known. More
   * threads are probed only while at least half a core idles: on a machine with no idle time a
   * probe of more threads only spins against the other processes (a step at 2 threads took 40x one
   * at 1 under load 20 on 2 cores), and it costs the probe's whole step.
   */
  freeCores?: () => number | undefined;
}

/**
 * Picks the thread count by measuring decode steps (tokens per ms of decode). It runs the best count
 * known, and now and then probes a neighbour (half or double) for a short window: a neighbour that
 * decodes faster takes over. A probe that loses makes the next one wait twice as long (up to
 * probeEveryMaxMs), so a steady machine pays little for them. A count whose rate collapses (another
 * process took its cores) loses to the last rate measured for its neighbour at once, without a probe.
 */
export class ThreadTuner {
  private best: number;
  private probing: number | undefined;
  private readonly rate = new Map<number, number>();
  private tokens = 0;
  private ms = 0;
  private steps = 0;
  private wait: number;
  private nextProbe: number;
  private up = true;
  private readonly o: Required<ThreadTunerOptions>;

  constructor(opts: ThreadTunerOptions) {
    this.o = { windowMs: 200, probeMs: 150, probeEveryMs: 2000, probeEveryMaxMs: 16_000, now: () => performance.now(), freeCores: () => undefined, ...opts };
    this.best = Math.max(1, Math.min(this.o.max, this.o.start));
    this.wait = this.o.probeEveryMs;
    this.nextProbe = this.o.now() + this.wait;
  }

  /** Threads for the next decode. */
  threads(): number { return this.probing ?? this.best; }

  /** The rates measured so far, by thread count (tokens per second). */
  rates(): Record<number, number> { return Object.fromEntries([...this.rate].map(([k, v]) => [k, Math.round(v * 1000)])); }

  /** Changes of the count run (not probes) so far: collapses taken, probes won. */
  switches = 0;
  probes = 0;

  /** A generation step (about one token per generating sequence) decoded `tokens` in `ms` with threads(). */
  step(tokens: number, ms: number): void {
    if (!(ms > 0) || tokens <= 0) return;
    this.tokens += tokens;
    this.ms += ms;
    this.steps++;
    const rate = this.tokens / this.ms;
    if (this.probing !== undefined) {
      const base = this.rate.get(this.best) ?? 0;
      // A probe ends after its window, or after one step that is already far behind.
      if (this.ms < this.o.probeMs && !(rate < base / 2)) return;
      this.rate.set(this.probing, rate);
      this.probes++;
      if (rate > base * 1.05) { this.switches++; this.best = this.probing; this.wait = this.o.probeEveryMs; } else this.wait = Math.min(this.wait * 2, this.o.probeEveryMaxMs);
      this.probing = undefined;
      this.nextProbe = this.o.now() + this.wait;
      this.reset();
      return;
    }
    if (this.ms < this.o.windowMs) return;
    const prev = this.rate.get(this.best);
    // A change of more than 2x is the machine changing (a load came or went), not noise: taken as it is.
    const jump = prev === undefined || rate < prev / 2 || rate > prev * 2;
    this.rate.set(this.best, jump ? rate : prev + 0.5 * (rate - prev));
    this.reset();
    // The best count slowed below what a neighbour did when last measured: switch now, and let
    // the next window say whether the neighbour still does that well.
    const cur = this.rate.get(this.best)!;
    // More threads only with a core to spare, as for a probe: a neighbour's rate may date from a quieter minute.
    for (const n of this.neighbours()) {
      if (!((this.rate.get(n) ?? 0) > cur * 1.2)) continue;
      if (n > this.best) { const free = this.o.freeCores(); if (free !== undefined && free < 0.5) continue; }
      this.switches++; this.best = n; return;
    }
    if (this.o.now() >= this.nextProbe) {
      const free = this.o.freeCores();
      const ns = this.neighbours().filter((n) => n < this.best || free === undefined || free >= 0.5);
      if (ns.length === 0) { this.nextProbe = this.o.now() + this.wait; return; }
      // Alternate up and down where both are worth a probe.
      this.up = !this.up;
      this.probing = ns.length === 1 ? ns[0] : this.up ? ns[1] : ns[0];
    }
  }

  /**
   * The counts to probe next: half and double, and once both of those have lost to the best, a
   * quarter below and above it. Halving and doubling alone left a 16-core machine at 7 threads (15,
   * halved; 14 lost), where the bare server ran its best at 8 and the counts between 8 and 14 went
   * untried; and a 4-CPU machine (3 at most) never tried 2.
   */
  private neighbours(): number[] {
    const down = Math.max(1, Math.floor(this.best / 2));
    const up = Math.min(this.o.max, this.best * 2);
    const coarse = [...new Set([down, up])].filter((n) => n !== this.best);
    const cur = this.rate.get(this.best);
    if (cur === undefined || !coarse.every((n) => (this.rate.get(n) ?? Infinity) < cur)) return coarse;
    const step = Math.max(1, Math.round(this.best / 4));
    return [...new Set([this.best - step, this.best + step].map((n) => Math.max(1, Math.min(this.o.max, n))))].filter((n) => n !== this.best);
  }

  private reset(): void { this.tokens = 0; this.ms = 0; this.steps = 0; }
}

interface AddonContext {
  initBatch(n: number): void; setThreads(n: number): void; decodeBatch(): Promise<void>;
  /** The self-built addon's decode and samples in one call (step-loop.ts): timed as a decode. */
  decodeBatchAndSample?(...args: unknown[]): Promise<unknown>;
  decodeBatchAndSampleSync?(...args: unknown[]): unknown;
}

/**
 * Let `tuner` choose the threads of every decode of a node-llama-cpp context, and learn from its
 * generation steps (batches of at most one token per sequence; prompts decode at another rate).
 * It reaches into node-llama-cpp 3.x (`_ctx`, the native context, and its initBatch, setThreads and
 * decodeBatch); false when they are not there, and the context keeps its fixed count.
 */
export function installThreadTuner(context: unknown, sequences: number, tuner: ThreadTuner): boolean {
  const ctx = (context as { _ctx?: Partial<AddonContext> })._ctx;
  if (!ctx || typeof ctx.initBatch !== 'function' || typeof ctx.setThreads !== 'function' || typeof ctx.decodeBatch !== 'function') return false;
  const init = ctx.initBatch.bind(ctx);
  const set = ctx.setThreads.bind(ctx);
  const decode = ctx.decodeBatch.bind(ctx);
  const fused = typeof ctx.decodeBatchAndSample === 'function' ? ctx.decodeBatchAndSample.bind(ctx) : undefined;
  const fusedSync = typeof ctx.decodeBatchAndSampleSync === 'function' ? ctx.decodeBatchAndSampleSync.bind(ctx) : undefined;
  let size = 0;
  let applied = -1;
  // The native class's methods are read-only on its prototype: own properties shadow them.
  const own = (name: keyof AddonContext, value: unknown): void => { Object.defineProperty(ctx, name, { value, configurable: true, writable: true }); };
  try {
    own('initBatch', (n: number) => { size = n; init(n); });
    // node-llama-cpp sets its own count before each decode: ours replaces it.
    own('setThreads', () => {});
    const before = (): number => {
      const n = tuner.threads();
      if (n !== applied) { set(n); applied = n; }
      return performance.now();
    };
    const after = (t0: number): void => { if (size <= sequences) tuner.step(size, performance.now() - t0); };
    const timed = async <T>(run: () => Promise<T>): Promise<T> => { const t0 = before(); const out = await run(); after(t0); return out; };
    own('decodeBatch', () => timed(decode));
    if (fused) own('decodeBatchAndSample', (...args: unknown[]) => timed(() => fused(...args)));
    if (fusedSync) own('decodeBatchAndSampleSync', (...args: unknown[]) => { const t0 = before(); const out = fusedSync(...args); after(t0); return out; });
  } catch {
    for (const name of ['initBatch', 'setThreads', 'decodeBatch', 'decodeBatchAndSample', 'decodeBatchAndSampleSync'] as const) delete (ctx as Record<string, unknown>)[name];
    return false;
  }
  return true;
}
