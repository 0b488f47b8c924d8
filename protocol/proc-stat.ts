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
