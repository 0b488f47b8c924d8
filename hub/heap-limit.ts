import fs from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';

const MiB = 2 ** 20;

/**
 * What the hub's memory holds besides V8's old space, at most, as the soak measured it inside its
 * rendered limit (1,000,000 tasks, three hub restarts): outside V8 (node's code, malloc's arenas,
 * which keep a restart's replay reads) up to 198 MB, buffers outside the heap up to 45 MB, and V8's
 * young generation (48 MiB beside the old space). The old space gets the rest of a memory limit.
 */
export const NON_HEAP_BYTES = 288 * MiB;

/**
 * V8's old space for a memory limit (bytes; `--max-old-space-size` takes MiB): what is left of the
 * limit besides the rest of the process, a quarter of the limit at least. Node 20 sizes the heap
 * from the cgroup's limit when it starts inside it (332 MiB in all at 640 MiB), from the machine's
 * memory otherwise (4,144 MiB on this 24 GiB VM: a process moved into a cgroup after its start, a
 * limit set on a running container); given, the bound is the same whichever it is, and leaves the
 * rest of the process its room.
 */
export function oldSpaceFor(limitBytes: number): number {
  return Math.max(Math.floor(limitBytes / 4), limitBytes - NON_HEAP_BYTES);
}

/** Where a process's memory limit is, for its cgroup path (`/proc/self/cgroup`), v2 and v1. */
function limitFiles(procCgroup: string): string[] {
  const out: string[] = [];
  const v2 = /^0::(\S*)$/m.exec(procCgroup)?.[1];
  const v1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\S*)$/m.exec(procCgroup)?.[1];
  if (v2 !== undefined) out.push(`/sys/fs/cgroup${v2 === '/' ? '' : v2}/memory.max`);
  if (v1 !== undefined) out.push(`/sys/fs/cgroup/memory${v1 === '/' ? '' : v1}/memory.limit_in_bytes`);
  // A container with its own cgroup namespace sees its group at the root.
  out.push('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes');
  return out;
}

/** This process's memory limit (its cgroup's, v2 or v1), or undefined where none is set below the machine's memory. */
export function memoryLimit(read: (f: string) => string = (f) => fs.readFileSync(f, 'utf8'), total = os.totalmem()): number | undefined {
  let self = '';
  try { self = read('/proc/self/cgroup'); } catch { /* not Linux */ }
  for (const f of limitFiles(self)) {
    let v: number;
    try { v = Number(read(f).trim()); } catch { continue; }
    if (Number.isFinite(v) && v > 0 && v < total) return v;
  }
  return undefined;
}

/**
 * Said at the hub's start when V8 may grow its heap past what the memory limit leaves it
 * (`oldSpaceFor`): the hub could be OOM-killed by its limit, where a bounded heap collects first.
 * Undefined when there is no limit or the heap's is within it.
 */
export function heapLimitWarning(heapLimit: number, limit: number | undefined): string | undefined {
  if (limit === undefined) return undefined;
  const want = oldSpaceFor(limit);
  if (heapLimit <= want + 64 * MiB) return undefined;
  return `V8 may grow the hub's heap to ${Math.round(heapLimit / MiB)} MiB, but its memory limit is ${Math.round(limit / MiB)} MiB: V8 need not collect before the kernel kills the hub at the limit; start it with NODE_OPTIONS=--max-old-space-size=${Math.floor(want / MiB)} (the deploy renders do)`;
}

/** The heap's own limit now (old space and the rest, as V8 counts it). */
export function heapLimit(): number { return v8.getHeapStatistics().heap_size_limit; }
