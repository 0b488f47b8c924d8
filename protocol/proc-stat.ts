import fs from 'node:fs';

// Shared by hub, worker and drivers (which must not import each other): one reading of /proc/PID/stat.

/**
 * Fields of /proc/PID/stat after the command name (state, ppid, …; field 3 of proc(5) is [0]), or
 * undefined if the process is gone. The command name (field 2) may hold spaces and parentheses, so
 * fields are counted after the last ')'.
 */
export function statFields(pid: number | 'self'): string[] | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch { return undefined; }
}

/** Start time of a live process (field 22: clock ticks since boot), undefined if gone or a zombie. */
export function procStart(pid: number | 'self'): string | undefined {
  const f = statFields(pid);
  return !f || f[0] === 'Z' ? undefined : f[19];
}

let ownNamespace: string | undefined | null = null;

/**
 * The pid namespace a process runs in (`pid:[4026531836]`), undefined if unreadable. A pid means
 * something only in its namespace: a hub in a container is PID 1 there and another pid on the host.
 */
export function pidNamespace(pid: number | 'self' = 'self'): string | undefined {
  if (pid === 'self' && ownNamespace !== null) return ownNamespace;
  let ns: string | undefined;
  try { ns = fs.readlinkSync(`/proc/${pid}/ns/pid`); } catch { ns = undefined; }
  if (pid === 'self') ownNamespace = ns;
  return ns;
}

/**
 * The pid, as this process's namespace numbers it, of the process that is `pid` in namespace `ns`
 * (its own, innermost one: the last entry of NSpid in /proc/PID/status). Found only where that
 * namespace is this one's or nested in it (the host sees a container's processes, not the reverse).
 */
export function pidFromNamespace(ns: string, pid: number): number | undefined {
  if (ns === pidNamespace()) return pid;
  let names: string[];
  try { names = fs.readdirSync('/proc'); } catch { return undefined; }
  for (const n of names) {
    if (!/^\d+$/.test(n) || pidNamespace(Number(n)) !== ns) continue;
    try {
      const m = /^NSpid:\s*(.*)$/m.exec(fs.readFileSync(`/proc/${n}/status`, 'utf8'));
      if (Number(m?.[1]?.trim().split(/\s+/).at(-1)) === pid) return Number(n);
    } catch { /* gone */ }
  }
  return undefined;
}
