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
import fs from 'node:fs';
import path from 'node:path';

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

function read(file: string): string | undefined {
  try { return fs.readFileSync(file, 'utf8'); } catch { return undefined; }
}

/** A count the kernel wrote: a finite number not below 0, else undefined. */
function count(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = text.trim();
  if (!/^\d+(\.\d+)?$/.test(t)) return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
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

interface Mount { root: string; point: string; fstype: string; options: string[] }

/** mountinfo's fields escape space, tab, newline and backslash as octal (\040). */
function unescape(s: string): string { return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))); }

function mounts(text: string): Mount[] {
  const out: Mount[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(' ');
    const dash = f.indexOf('-');
    if (dash < 6 || f.length < dash + 3) continue;
    out.push({ root: unescape(f[3]!), point: unescape(f[4]!), fstype: f[dash + 1]!, options: (f[dash + 3] ?? '').split(',') });
  }
  return out;
}

/**
 * The directory our cgroup `own` has under a mount of its hierarchy, and those of its ancestors up to
 * the mount's root (ours first). A mount whose root is not above our cgroup (a cgroup namespace's
 * view, a bind mount of another cgroup) gives only its mount point, as reading at the root did.
 */
function walk(own: string, candidates: Mount[], root: string): string[] {
  const above = (m: Mount): boolean => m.root === '/' || own === m.root || own.startsWith(`${m.root}/`);
  const m = candidates.find(above) ?? candidates[0];
  if (!m) return [];
  const top = path.join(root, m.point);
  if (!above(m)) return [top];
  const rel = path.posix.relative(m.root, path.posix.normalize(own));
  if (rel.startsWith('..')) return [top];
  const parts = rel.split('/').filter(Boolean);
  const dirs: string[] = [];
  for (let i = parts.length; i >= 0; i--) dirs.push(path.join(top, ...parts.slice(0, i)));
  return dirs;
}

/**
 * This process's CPU cgroup as `root` (a directory holding proc/ and sys/; '/' for the machine)
 * shows it; undefined where /proc/self/cgroup or the mounts say nothing of one.
 */
export function cpuCgroup(root = '/'): CpuCgroup | undefined {
  const self = read(path.join(root, 'proc/self/cgroup'));
  const info = read(path.join(root, 'proc/self/mountinfo'));
  if (self === undefined || info === undefined) return undefined;
  const ms = mounts(info);
  let v1: { path: string } | undefined;
  let acct: { path: string } | undefined;
  let v2: { path: string } | undefined;
  for (const line of self.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const controllers = m[2]!.split(',');
    if (m[1] === '0' && m[2] === '') v2 = { path: m[3]! };
    else {
      if (controllers.includes('cpu')) v1 = { path: m[3]! };
      if (controllers.includes('cpuacct')) acct = { path: m[3]! };
    }
  }
  // A v1 cpu controller where there is one (a hybrid machine mounts cgroup2 beside it, without cpu).
  const cpuMounts = ms.filter((m) => m.fstype === 'cgroup' && m.options.includes('cpu'));
  if (v1 && cpuMounts.length > 0) {
    const dirs = walk(v1.path, cpuMounts, root);
    const acctMounts = ms.filter((m) => m.fstype === 'cgroup' && m.options.includes('cpuacct'));
    // Usage from cpuacct where it is the same hierarchy (cpu,cpuacct mounted together), or one
    // that mirrors it: a separate hierarchy where our cgroup has the same path. Elsewhere its
    // cgroups hold other processes than the cpu ones of the same name.
    const together = cpuMounts.some((m) => m.options.includes('cpuacct'));
    const acctDirs = together ? dirs : acct && acct.path === v1.path && acctMounts.length > 0 ? walk(acct.path, acctMounts, root) : [];
    const levels: QuotaLevel[] = [];
    dirs.forEach((dir, i) => {
      const cpus = quotaV1(dir);
      const a = acctDirs.length === dirs.length ? acctDirs[i] : undefined;
      if (cpus !== undefined) levels.push({ dir, cpus, ...(a ? { usage: { file: path.join(a, 'cpuacct.usage'), unit: 'ns' as const } } : {}) });
    });
    return { version: 1, levels, quota: Math.min(Infinity, ...levels.map((l) => l.cpus)) };
  }
  const v2Mounts = ms.filter((m) => m.fstype === 'cgroup2');
  if (v2 && v2Mounts.length > 0) {
    const levels: QuotaLevel[] = [];
    for (const dir of walk(v2.path, v2Mounts, root)) {
      const cpus = quotaV2(dir);
      if (cpus !== undefined) levels.push({ dir, cpus, usage: { file: path.join(dir, 'cpu.stat'), unit: 'usec-stat' } });
    }
    return { version: 2, levels, quota: Math.min(Infinity, ...levels.map((l) => l.cpus)) };
  }
  return undefined;
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
