import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { heapLimitWarning, memoryLimit, oldSpaceFor } from '../../hub/heap-limit.js';

/** The hub's heap against its container's memory limit: node sizes it from the machine's memory where the limit came after its start. */

const MiB = 2 ** 20;
const GiB = 2 ** 30;
/** A fake machine: a directory holding proc/ and sys/ with `files` (path: text). */
function tree(t: Test, files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'heap-limit-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  for (const [p, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
    fs.writeFileSync(path.join(root, p), text);
  }
  return root;
}
const V1 = '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n';
const V2 = '30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n';

t.test('the limit of the process\'s own cgroup or one above it, v1 or v2; none where it is not below the machine\'s memory', async (t) => {
  const v1 = '4:memory:/kubepods/pod1/c1\n3:cpuset:/\n0::/\n';
  const lim = 'sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes';
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': v1, 'proc/self/mountinfo': V1, [lim]: String(640 * MiB) }), 24 * GiB), 640 * MiB, 'v1, by its path');
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': v1, 'proc/self/mountinfo': V1, [lim]: '9223372036854771712', 'sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes': String(2 * GiB) }), 24 * GiB), 2 * GiB, 'v1, a parent\'s limit');
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': v1, 'proc/self/mountinfo': V1, [lim]: '9223372036854771712' }), 24 * GiB), undefined, 'v1 without a limit');
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': '0::/\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/memory.max': String(700 * MiB) }), 24 * GiB), 700 * MiB, 'v2 at the root (a cgroup namespace)');
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': '0::/system.slice/swarm.service\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/system.slice/swarm.service/memory.max': 'max\n', 'sys/fs/cgroup/system.slice/memory.max': String(900 * MiB) }), 24 * GiB), 900 * MiB, 'v2 nested, the slice\'s MemoryMax');
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': '0::/\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/memory.max': 'max' }), 24 * GiB), undefined, 'v2 without a limit');
  t.equal(memoryLimit(tree(t, { 'proc/self/cgroup': '0::/\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/memory.max': 'garbage' }), 24 * GiB), undefined, 'garbage reads as none');
  t.equal(memoryLimit(tree(t, {}), 24 * GiB), undefined, 'no cgroup files at all');
});

t.test('a heap that may grow past what the limit leaves it is said, with the old space to give; a bounded one is not', async (t) => {
  t.equal(oldSpaceFor(640 * MiB), 352 * MiB, '640 MiB: 352 of it old space');
  t.equal(oldSpaceFor(256 * MiB), 64 * MiB, 'a small limit: a quarter at least');
  t.match(heapLimitWarning(4144 * MiB, 640 * MiB) ?? '', /heap to 4144 MiB, but its memory limit is 640 MiB.*--max-old-space-size=352/);
  t.equal(heapLimitWarning(4144 * MiB, undefined), undefined, 'no limit: nothing to say');
  t.equal(heapLimitWarning(400 * MiB, 640 * MiB), undefined, '--max-old-space-size=352 (400 MiB with the young generation): nothing to say');
  t.equal(heapLimitWarning(332 * MiB, 640 * MiB), undefined, 'node started inside the 640 MiB cgroup (332 MiB): nothing to say');
});
