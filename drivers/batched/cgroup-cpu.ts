/**
 * The CPU quota of this process's own cgroup, and how much of it the cgroup uses.
 *
 * A quota is not only at the cgroup root: without a cgroup namespace of its own (podman
 * --cgroupns=host, a systemd service with CPUQuota=, `systemd-run -p CPUQuota=150%`, some k8s
 * runtimes) the process sits in a nested cgroup, and the quota is at the path /proc/self/cgroup
 * names, or at any ancestor of it. As Go's automaxprocs and the JDK do: the own cgroup's path (v2
 * "0::/path"; v1 the line whose controllers include cpu), under the mount point /proc/self/mountinfo
 * gives that hierarchy, walked from the own cgroup up to the mount's root; the smallest quota/period
 * on the way is the limit.
 *
 * Every read is of text the kernel (or a fake tree under `root`, for tests) writes: anything missing,
 * unreadable or not a number reads as "no quota" or "not known", never as an error.
 */
import path from 'node:path';
import { controllerDirs, count, ownCgroups, read } from '../../protocol/cgroup.js';

/** A cgroup on the way from ours up to the mount root that has a CPU quota. */
export interface QuotaLevel {
  /** Its directory in the cpu hierarchy (cpu.max or cpu.cfs_quota_us, cpu.stat). */
  dir: string;
  /** CPUs its quota allows: quota / period. */
  cpus: number;
  /** Where its CPU usage is read (v2: cpu.stat usage_usec; v1: cpuacct.usage); undefined: nowhere. */
  usage?: { file: string; unit: 'usec-stat' | 'ns' };
}

export interface CpuCgroup {
  version: 1 | 2;
  /** From our own cgroup up to the mount root, the levels that have a quota (ours first). */
  levels: QuotaLevel[];
  /** The smallest of the levels' quotas, in CPUs; Infinity where none has one. */
  quota: number;
}

/** `key value` lines (cpu.stat) into numbers; keys whose values are not counts are left out. */
export function statLines(text: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of (text ?? '').split('\n')) {
    const [k, v, more] = line.trim().split(/\s+/);
    const n = more === undefined ? count(v) : undefined;
    if (k && n !== undefined) out.set(k, n);
  }
  return out;
}

/** CPUs a quota of `quota` per `period` allows; undefined: none ("max", -1, 0, garbage). */
function share(quota: number | undefined, period: number | undefined): number | undefined {
  if (quota === undefined || period === undefined || !(quota > 0) || !(period > 0)) return undefined;
  const s = quota / period;
  return Number.isFinite(s) && s > 0 ? s : undefined;
}

function quotaV2(dir: string): number | undefined {
  const [q, p, more] = (read(path.join(dir, 'cpu.max')) ?? '').trim().split(/\s+/);
  if (more !== undefined || q === 'max') return undefined;
  return share(count(q), count(p));
}

function quotaV1(dir: string): number | undefined {
  const q = read(path.join(dir, 'cpu.cfs_quota_us'));
  // -1 is "no quota": count() reads it as not a count.
  if (count(q) === undefined) return undefined;
  return share(count(q), count(read(path.join(dir, 'cpu.cfs_period_us'))));
}

/**
 * This process's CPU cgroup as `root` (a directory holding proc/ and sys/; '/' for the machine)
 * shows it; undefined where /proc/self/cgroup or the mounts say nothing of one.
 */
export function cpuCgroup(root = '/'): CpuCgroup | undefined {
  const own = ownCgroups(root);
  const cpu = own && controllerDirs(own, 'cpu');
  if (!own || !cpu) return undefined;
  if (cpu.version === 1) {
    const dirs = cpu.dirs;
    // Usage from cpuacct where it is the same hierarchy (cpu,cpuacct mounted together), or one
    // that mirrors it: a separate hierarchy where our cgroup has the same path. Elsewhere its
    // cgroups hold other processes than the cpu ones of the same name.
    const together = own.mounts.some((m) => m.fstype === 'cgroup' && m.options.includes('cpu') && m.options.includes('cpuacct'));
    const acct = controllerDirs(own, 'cpuacct');
    const acctDirs = together ? dirs : acct?.version === 1 && own.v1.get('cpuacct') === own.v1.get('cpu') ? acct.dirs : [];
    const levels: QuotaLevel[] = [];
    dirs.forEach((dir, i) => {
      const cpus = quotaV1(dir);
      const a = acctDirs.length === dirs.length ? acctDirs[i] : undefined;
      if (cpus !== undefined) levels.push({ dir, cpus, ...(a ? { usage: { file: path.join(a, 'cpuacct.usage'), unit: 'ns' as const } } : {}) });
    });
    return { version: 1, levels, quota: Math.min(Infinity, ...levels.map((l) => l.cpus)) };
  }
  const levels: QuotaLevel[] = [];
  for (const dir of cpu.dirs) {
    const cpus = quotaV2(dir);
    if (cpus !== undefined) levels.push({ dir, cpus, usage: { file: path.join(dir, 'cpu.stat'), unit: 'usec-stat' } });
  }
  return { version: 2, levels, quota: Math.min(Infinity, ...levels.map((l) => l.cpus)) };
}

/** One reading of a quota level: CPU used (ns, undefined: not readable) and throttling so far. */
export interface LevelSample { usedNs?: number; throttled?: number; throttledNs?: number }
export interface CgroupSample { atMs: number; levels: LevelSample[] }

function sampleLevel(version: 1 | 2, l: QuotaLevel): LevelSample {
  const stat = statLines(read(path.join(l.dir, 'cpu.stat')));
  const out: LevelSample = {};
  const throttled = stat.get('nr_throttled');
  const throttledNs = version === 2 ? (stat.has('throttled_usec') ? stat.get('throttled_usec')! * 1000 : undefined) : stat.get('throttled_time');
  if (throttled !== undefined) out.throttled = throttled;
  if (throttledNs !== undefined) out.throttledNs = throttledNs;
  if (l.usage?.unit === 'usec-stat') {
    const u = stat.get('usage_usec');
    if (u !== undefined) out.usedNs = u * 1000;
  } else if (l.usage?.unit === 'ns') {
    const u = count(read(l.usage.file));
    if (u !== undefined) out.usedNs = u;
  }
  return out;
}

/**
 * A reader of the quota levels' usage and throttling; undefined where no level has a quota (then
 * nothing is read at all). The cgroup's layout is found once, here; each call reads one or two small
 * files per quota level.
 */
export function cgroupCpuReader(root = '/', now = () => performance.now(), group = cpuCgroup(root)): (() => CgroupSample) & { group: CpuCgroup } | undefined {
  if (!group || group.levels.length === 0) return undefined;
  return Object.assign(() => ({ atMs: now(), levels: group.levels.map((l) => sampleLevel(group.version, l)) }), { group });
}

/**
 * CPUs the cgroup's quota left unused between two readings: the smallest over the quota levels of
 * quota less the level's usage rate, 0 at a level that was throttled in between (its processes
 * waited for the next period: whatever the average says, none was free when they wanted it).
 * Undefined where no level told anything (no usage and no throttling readable, or no time passed).
 */
export function quotaHeadroom(group: CpuCgroup, a: CgroupSample, b: CgroupSample): number | undefined {
  const dtNs = (b.atMs - a.atMs) * 1e6;
  if (!(dtNs > 0)) return undefined;
  let free: number | undefined;
  group.levels.forEach((l, i) => {
    const x = a.levels[i], y = b.levels[i];
    if (!x || !y) return;
    let f: number | undefined;
    if ((x.throttled !== undefined && y.throttled !== undefined && y.throttled > x.throttled) ||
      (x.throttledNs !== undefined && y.throttledNs !== undefined && y.throttledNs > x.throttledNs)) f = 0;
    else if (x.usedNs !== undefined && y.usedNs !== undefined && y.usedNs >= x.usedNs) f = Math.max(0, l.cpus - (y.usedNs - x.usedNs) / dtNs);
    if (f !== undefined) free = free === undefined ? f : Math.min(free, f);
  });
  return free;
}
