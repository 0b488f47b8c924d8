import t from 'tap';
import { heapLimitWarning, memoryLimit, oldSpaceFor } from '../../hub/heap-limit.js';

/** The hub's heap against its container's memory limit: node sizes it from the machine's memory where the limit came after its start. */

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const files = (m: Record<string, string>) => (f: string) => { if (f in m) return m[f]!; throw new Error('ENOENT'); };

t.test('the limit of the process\'s own cgroup, v1 or v2; none where it is not below the machine\'s memory', async (t) => {
  const v1 = '4:memory:/kubepods/pod1/c1\n3:cpuset:/\n';
  t.equal(memoryLimit(files({ '/proc/self/cgroup': v1, '/sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes': String(640 * MiB) }), 24 * GiB), 640 * MiB, 'v1, by its path');
  t.equal(memoryLimit(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': String(700 * MiB) }), 24 * GiB), 700 * MiB, 'v2 at the root (a cgroup namespace)');
  t.equal(memoryLimit(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': 'max' }), 24 * GiB), undefined, 'v2 without a limit');
  t.equal(memoryLimit(files({ '/proc/self/cgroup': v1, '/sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes': '9223372036854771712' }), 24 * GiB), undefined, 'v1 without a limit');
  t.equal(memoryLimit(files({}), 24 * GiB), undefined, 'no cgroup files at all');
});

t.test('a heap that may grow past what the limit leaves it is said, with the old space to give; a bounded one is not', async (t) => {
  t.equal(oldSpaceFor(640 * MiB), 352 * MiB, '640 MiB: 352 of it old space');
  t.equal(oldSpaceFor(256 * MiB), 64 * MiB, 'a small limit: a quarter at least');
  t.match(heapLimitWarning(4144 * MiB, 640 * MiB) ?? '', /heap to 4144 MiB, but its memory limit is 640 MiB.*--max-old-space-size=352/);
  t.equal(heapLimitWarning(4144 * MiB, undefined), undefined, 'no limit: nothing to say');
  t.equal(heapLimitWarning(400 * MiB, 640 * MiB), undefined, '--max-old-space-size=352 (400 MiB with the young generation): nothing to say');
  t.equal(heapLimitWarning(332 * MiB, 640 * MiB), undefined, 'node started inside the 640 MiB cgroup (332 MiB): nothing to say');
});
