/**
 * This process's own cgroups, as the kernel shows them under `root` (a directory holding proc/ and
 * sys/; '/' for the machine, a fake tree in tests): a limit is not only at the cgroup root. Without a
 * cgroup namespace of its own (podman --cgroupns=host, a systemd service with CPUQuota= or MemoryMax=,
 * `systemd-run -p …`, some k8s runtimes) the process sits in a nested cgroup, and the limit is at the
 * path /proc/self/cgroup names, or at any ancestor of it. As Go's automaxprocs and the JDK do: the own
 * cgroup's path (v2 "0::/path"; v1 the line that names the controller), under the mount point
 * /proc/self/mountinfo gives that hierarchy, walked from the own cgroup up to the mount's root.
 *
 * Every read is of text the kernel writes: anything missing, unreadable or not a number reads as
 * "not known", never as an error.
 */
import fs from 'node:fs';
import path from 'node:path';

export function read(file: string): string | undefined {
  try { return fs.readFileSync(file, 'utf8'); } catch { return undefined; }
}

/** A count the kernel wrote: a finite number not below 0, else undefined. */
export function count(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = text.trim();
  if (!/^\d+(\.\d+)?$/.test(t)) return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
}

export interface Mount { root: string; point: string; fstype: string; options: string[] }

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

/** What /proc/self/cgroup and the mounts say of this process's cgroups. */
export interface OwnCgroups {
  root: string;
  /** v1: each controller's own cgroup path. */
  v1: Map<string, string>;
  /** v2: the own cgroup path. */
  v2?: string;
  mounts: Mount[];
}

/** This process's cgroups as `root` shows them; undefined where /proc/self/cgroup or the mounts are not readable. */
export function ownCgroups(root = '/'): OwnCgroups | undefined {
  const self = read(path.join(root, 'proc/self/cgroup'));
  const info = read(path.join(root, 'proc/self/mountinfo'));
  if (self === undefined || info === undefined) return undefined;
  const v1 = new Map<string, string>();
  let v2: string | undefined;
  for (const line of self.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === '0' && m[2] === '') v2 = m[3]!;
    else for (const c of m[2]!.split(',')) if (c) v1.set(c, m[3]!);
  }
  return { root, v1, ...(v2 !== undefined ? { v2 } : {}), mounts: mounts(info) };
}

/**
 * The directories of our cgroup in `controller`'s hierarchy, ours first, up to its mount's root: the
 * v1 one where that controller is mounted (a hybrid machine mounts cgroup2 beside it, without it),
 * else the v2 one; undefined where neither is.
 */
export function controllerDirs(own: OwnCgroups, controller: string): { version: 1 | 2; dirs: string[] } | undefined {
  const p1 = own.v1.get(controller);
  const m1 = own.mounts.filter((m) => m.fstype === 'cgroup' && m.options.includes(controller));
  if (p1 !== undefined && m1.length > 0) return { version: 1, dirs: walk(p1, m1, own.root) };
  const m2 = own.mounts.filter((m) => m.fstype === 'cgroup2');
  if (own.v2 !== undefined && m2.length > 0) return { version: 2, dirs: walk(own.v2, m2, own.root) };
  return undefined;
}
