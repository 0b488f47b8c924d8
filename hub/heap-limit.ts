import os from 'node:os';
import path from 'node:path';
import { controllerDirs, count, ownCgroups, read } from '../protocol/cgroup.js';
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

/**
 * This process's memory limit: the smallest over its own cgroup and those above it (protocol/cgroup.ts),
 * v1 `memory.limit_in_bytes` or v2 `memory.max`; undefined where none is set below the machine's memory.
 * `root` holds the proc/ and sys/ to read ('/': this machine's).
 */
export function memoryLimit(root = '/', total = os.totalmem()): number | undefined {
  const own = ownCgroups(root);
  const mem = own && controllerDirs(own, 'memory');
  if (!mem) return undefined;
  let limit: number | undefined;
  for (const dir of mem.dirs) {
    const v = count(read(path.join(dir, mem.version === 1 ? 'memory.limit_in_bytes' : 'memory.max')));
    if (v !== undefined && v > 0 && v < total && (limit === undefined || v < limit)) limit = v;
  }
  return limit;
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
