import fs from 'node:fs';

/** CPU seconds (user+system) a process has used, from /proc/PID/stat. */
export function cpuSeconds(pid: number): number {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  return ticks / 100; // USER_HZ is 100 on Linux
}

/** CPU seconds of each thread of a process so far, by thread id (/proc/PID/task/TID/stat). */
export function threadCpuSeconds(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), (Number(f[11]) + Number(f[12])) / 100);
    } catch { /* thread gone */ }
  }
  return out;
}

/** Read and write system calls a process has made (syscr, syscw of /proc/PID/io): wakes and writes per task. */
export function syscalls(pid: number): { reads: number; writes: number } {
  const t = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  return { reads: Number(/^syscr:\s+(\d+)/m.exec(t)?.[1] ?? 0), writes: Number(/^syscw:\s+(\d+)/m.exec(t)?.[1] ?? 0) };
}

/**
 * The machine's CPU seconds so far by kind, from /proc/stat: `idle` (with iowait) is capacity nobody
 * used, `steal` what the hypervisor gave to other guests. Differences around a run tell a run that
 * left cores idle from one that lost them to the host.
 */
export function machineCpu(): { busy: number; idle: number; steal: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  return { busy: (user + nice + system + irq + softirq) / 100, idle: (idle + iowait) / 100, steal: steal / 100 };
}

/** Run and run-queue wait of one thread so far, ms (/proc/PID/task/TID/schedstat); undefined if unreadable. */
function schedstat(pid: number, tid: number | string): { run: number; wait: number } | undefined {
  try {
    const [run, wait] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
    return { run: run! / 1e6, wait: wait! / 1e6 };
  } catch { return undefined; }
}

/** Run and run-queue wait of a process's main thread, ms (zeros if unreadable). */
export function mainThreadSched(pid: number): { run: number; wait: number } {
  return schedstat(pid, pid) ?? { run: 0, wait: 0 };
}

/** One thread's schedstat times (ms), its sleeps (voluntary switches), preemptions (involuntary) and the CPU it last ran on. */
export interface ThreadSched { run: number; wait: number; sleeps: number; preempted: number; cpu: number }

/**
 * Run and run-queue wait (ms), voluntary and involuntary context switches and last CPU of every thread
 * of a process so far, by thread id (/proc/PID/task/TID/schedstat, status and stat); a thread gone is
 * left out, as is a process gone.
 */
export function threadSched(pid: number): Map<number, ThreadSched> {
  const m = new Map<number, ThreadSched>();
  let tids: string[];
  try { tids = fs.readdirSync(`/proc/${pid}/task`); } catch { return m; }
  for (const t of tids) {
    try {
      const s = schedstat(pid, t);
      if (!s) continue;
      const status = fs.readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
      const stat = fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const sleeps = Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1] ?? 0);
      const preempted = Number(/^nonvoluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1] ?? 0);
      // Field 39 (processor); the fields after the command's closing parenthesis start at field 3.
      const cpu = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[36]);
      m.set(Number(t), { ...s, sleeps, preempted, cpu });
    } catch { /* gone */ }
  }
  return m;
}

/** Resident set size in MB, from /proc/PID/status. */
export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** Proportional set size in MB, from /proc/PID/smaps_rollup. */
export function pssMb(pid: number): number {
  const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

export function machine(): string {
  const cpus = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? 'cpu';
  const n = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^processor/gm) ?? []).length;
  const mem = Number(/MemTotal:\s+(\d+)/.exec(fs.readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0) / 1024 / 1024;
  return `${n} x ${cpus}, ${mem.toFixed(0)} GiB, node ${process.version}`;
}
