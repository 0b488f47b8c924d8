import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { cgroupCpuReader, cpuCgroup } from '../../drivers/batched/cgroup-cpu.js';
import { cpuLimit, cpuTimes, idleCores, spareCore, startThreads } from '../../drivers/batched/threads.js';

/** A fake machine: a directory holding proc/ and sys/ with `files` (path: text; a path ending in / is made a directory). */
function tree(t: Test, files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cgroup-cpu-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  for (const [p, text] of Object.entries(files)) {
    const f = path.join(root, p);
    if (p.endsWith('/')) { fs.mkdirSync(f, { recursive: true }); continue; }
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, text);
  }
  return root;
}
const write = (root: string, p: string, text: string): void => fs.writeFileSync(path.join(root, p), text);

// This machine's layout (a hybrid one): v1 controllers each on its own mount, cgroup2 beside them.
const HYBRID = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');
const V2 = '30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n';
const HOST_STAT = 'cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\nprocs_running 1\n';

t.test('v1, nested without a cgroup namespace: the quota of our own cgroup, not the root\'s', async (t) => {
  const root = tree(t, {
    'proc/self/cgroup': '5:memory:/a/b\n4:cpu:/a/b\n3:cpuacct:/a/b\n0::/\n',
    'proc/self/mountinfo': HYBRID,
    'sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1\n', 'sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n',
    'sys/fs/cgroup/cpu/a/cpu.cfs_quota_us': '-1\n', 'sys/fs/cgroup/cpu/a/cpu.cfs_period_us': '100000\n',
    'sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us': '150000\n', 'sys/fs/cgroup/cpu/a/b/cpu.cfs_period_us': '100000\n',
  });
  const g = cpuCgroup(root)!;
  t.equal(g.version, 1);
  t.equal(g.quota, 1.5);
  t.same(g.levels.map((l) => path.relative(root, l.dir)), ['sys/fs/cgroup/cpu/a/b']);
  t.equal(g.levels[0]!.usage?.file, path.join(root, 'sys/fs/cgroup/cpuacct/a/b/cpuacct.usage'), 'cpuacct mirrors the cpu path: usage read there');
  t.equal(cpuLimit(root, 16), 2, '1.5 CPUs rounded up');
  t.equal(cpuLimit(root, 1), 1, 'affinity below the quota wins');
  // An ancestor with a smaller quota is the limit.
  write(root, 'sys/fs/cgroup/cpu/a/cpu.cfs_quota_us', '50000');
  t.equal(cpuCgroup(root)!.quota, 0.5);
  t.equal(cpuLimit(root, 16), 1, 'never below one');
});

t.test('v1 with cpu and cpuacct mounted together, and with a cpuacct cgroup of another path', async (t) => {
  const together = tree(t, {
    'proc/self/cgroup': '3:cpu,cpuacct:/svc\n0::/\n',
    'proc/self/mountinfo': '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n',
    'sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_quota_us': '400000', 'sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_period_us': '100000',
  });
  const g = cpuCgroup(together)!;
  t.equal(g.quota, 4);
  t.equal(g.levels[0]!.usage?.file, path.join(together, 'sys/fs/cgroup/cpu,cpuacct/svc/cpuacct.usage'));
  const apart = tree(t, {
    'proc/self/cgroup': '4:cpu:/a\n3:cpuacct:/other\n',
    'proc/self/mountinfo': HYBRID,
    'sys/fs/cgroup/cpu/a/cpu.cfs_quota_us': '200000', 'sys/fs/cgroup/cpu/a/cpu.cfs_period_us': '100000',
  });
  const h = cpuCgroup(apart)!;
  t.equal(h.quota, 2);
  t.equal(h.levels[0]!.usage, undefined, 'a cpuacct cgroup holding other processes is not read');
});

t.test('v2: nested, in a cgroup namespace, under a bind mount of our own cgroup, and a hybrid machine\'s cgroup2 without cpu', async (t) => {
  const nested = tree(t, {
    'proc/self/cgroup': '0::/user.slice/x.service\n',
    'proc/self/mountinfo': V2,
    'sys/fs/cgroup/user.slice/cpu.max': '200000 100000\n',
    'sys/fs/cgroup/user.slice/x.service/cpu.max': '150000 100000\n',
  });
  const g = cpuCgroup(nested)!;
  t.equal(g.version, 2);
  t.equal(g.quota, 1.5);
  t.same(g.levels.map((l) => path.relative(nested, l.dir)), ['sys/fs/cgroup/user.slice/x.service', 'sys/fs/cgroup/user.slice'], 'ours first, then up to the root');
  t.equal(cpuLimit(nested, 8), 2);
  write(nested, 'sys/fs/cgroup/user.slice/cpu.max', '50000 100000');
  t.equal(cpuLimit(nested, 8), 1, 'the parent\'s smaller quota');

  const ns = tree(t, { 'proc/self/cgroup': '0::/\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/cpu.max': '300000 100000\n' });
  t.equal(cpuLimit(ns, 8), 3, 'a container\'s own namespace: the quota at the mount point');

  const bind = tree(t, {
    'proc/self/cgroup': '0::/kubepods/pod1/c1\n',
    'proc/self/mountinfo': '30 23 0:26 /kubepods/pod1/c1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n',
    'sys/fs/cgroup/cpu.max': '250000 100000\n',
  });
  t.equal(cpuLimit(bind, 8), 3, 'a mount whose root is our cgroup: its mount point');

  const foreign = tree(t, {
    'proc/self/cgroup': '0::/elsewhere\n',
    'proc/self/mountinfo': '30 23 0:26 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n',
    'sys/fs/cgroup/cpu.max': '100000 100000\n',
  });
  t.equal(cpuLimit(foreign, 8), 1, 'a mount of a cgroup not above ours: its mount point, as the root-only reading did');

  const hybrid = tree(t, {
    'proc/self/cgroup': '4:cpu:/\n3:cpuacct:/\n0::/x\n',
    'proc/self/mountinfo': HYBRID,
    'sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', 'sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000',
    'sys/fs/cgroup/unified/x/cpu.stat': 'usage_usec 5\n',
  });
  t.same(cpuCgroup(hybrid), { version: 1, levels: [], quota: Infinity }, 'the v1 cpu controller is the one that limits');
  t.equal(cgroupCpuReader(hybrid), undefined, 'no quota: nothing to read');

  const spaced = tree(t, {
    'proc/self/cgroup': '0::/my svc\n',
    'proc/self/mountinfo': '30 23 0:26 / /sys/fs/cgroup\\040x rw - cgroup2 cgroup2 rw\n',
    'sys/fs/cgroup x/my svc/cpu.max': '100000 100000',
  });
  t.equal(cpuLimit(spaced, 4), 1, 'mountinfo\'s octal escapes');
});

t.test('no cgroup, unreadable files and garbage: the affinity\'s count, never an error', async (t) => {
  t.equal(cpuLimit(tree(t, {}), 6), 6, 'no /proc at all');
  t.equal(cpuCgroup(tree(t, {})), undefined);
  t.equal(cpuLimit(tree(t, { 'proc/self/cgroup': '0::/\n', 'proc/self/mountinfo': '' }), 6), 6, 'no cgroup mounted');
  t.equal(cpuLimit(tree(t, { 'proc/self/cgroup/': '', 'proc/self/mountinfo/': '' }), 6), 6, 'unreadable (directories)');
  t.equal(cpuLimit(tree(t, { 'proc/self/cgroup': 'garbage\n\n::::\n', 'proc/self/mountinfo': 'x - y\n1 2 3\n - - - - - - - -\n' }), 6), 6, 'garbage');
  for (const [v2, v1q, v1p, why] of [
    ['max 100000', '-1', '100000', '"max" and -1: no quota'],
    ['', '', '', 'empty'],
    ['-100000 100000', '-100000', '100000', 'negative'],
    ['100000 0', '100000', '0', 'a zero period'],
    ['100000 -5', '100000', '-5', 'a negative period'],
    ['abc 100000', 'abc', '100000', 'not a number'],
    ['1e5 100000', '1e5', '100000', 'not how the kernel writes it'],
    ['100000 100000 7', '100000 7', '100000', 'extra fields'],
    ['99999999999999999999999999 1', '99999999999999999999999999', '1', 'huge'],
  ]) {
    const a = tree(t, { 'proc/self/cgroup': '0::/s\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/s/cpu.max': v2! });
    const b = tree(t, {
      'proc/self/cgroup': '2:cpu:/s\n', 'proc/self/mountinfo': HYBRID,
      'sys/fs/cgroup/cpu/s/cpu.cfs_quota_us': v1q!, 'sys/fs/cgroup/cpu/s/cpu.cfs_period_us': v1p!,
    });
    t.equal(cpuLimit(a, 6), 6, `v2 ${why}`);
    t.equal(cpuLimit(b, 6), 6, `v1 ${why}`);
  }
  const dirQuota = tree(t, { 'proc/self/cgroup': '0::/s\n', 'proc/self/mountinfo': V2, 'sys/fs/cgroup/s/cpu.max/': '' });
  t.equal(cpuLimit(dirQuota, 6), 6, 'cpu.max unreadable');
  t.ok(cpuLimit() >= 1 && cpuLimit() <= os.availableParallelism(), 'this machine');
  t.equal(cpuTimes(tree(t, {})), undefined);
});

t.test('idle under a quota: no more than the quota less the cgroup\'s usage, none while throttled, however idle the host', async (t) => {
  const root = tree(t, {
    'proc/self/cgroup': '0::/pod/c\n', 'proc/self/mountinfo': V2, 'proc/stat': HOST_STAT,
    'sys/fs/cgroup/pod/cpu.max': '400000 100000\n', 'sys/fs/cgroup/pod/cpu.stat': 'usage_usec 0\nnr_throttled 0\nthrottled_usec 0\n',
    'sys/fs/cgroup/pod/c/cpu.max': 'max 100000\n', 'sys/fs/cgroup/pod/c/cpu.stat': 'usage_usec 0\n',
  });
  let clock = 0;
  let host = { idle: 0, total: 0 };
  const reader = cgroupCpuReader(root, () => clock)!;
  t.same(reader.group.levels.map((l) => path.relative(root, l.dir)), ['sys/fs/cgroup/pod'], 'the quota is the parent\'s');
  const free = idleCores(() => host, 16, reader);
  // A second: the host idled 10 of 16 cores, the pod (our engine and its siblings) used 3.2 CPUs of 4.
  clock = 1000; host = { idle: 1000, total: 1600 };
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec 3200000\nnr_throttled 0\nthrottled_usec 0\n');
  t.equal(Math.round(free()! * 100) / 100, 0.8, 'the quota\'s 0.8, not the host\'s 10');
  // The next: the pod was throttled, though its average stayed under the quota.
  clock = 2000; host = { idle: 2000, total: 3200 };
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec 5200000\nnr_throttled 3\nthrottled_usec 40000\n');
  t.equal(free(), 0, 'throttled: none idle');
  // A quiet second for the pod, a busy one for the host: the host's reading is the smaller.
  clock = 3000; host = { idle: 2030, total: 4800 };
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec 5300000\nnr_throttled 3\nthrottled_usec 40000\n');
  t.equal(Math.round(free()! * 100) / 100, 0.3, 'the host\'s 0.3');
  // Garbage in cpu.stat: the host's reading alone.
  clock = 4000; host = { idle: 3030, total: 6400 };
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec\nnr_throttled x\n');
  t.equal(free(), 10);
  // The host unreadable: the quota's reading alone.
  clock = 5000;
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec 5300000\nnr_throttled 3\n');
  const undef = idleCores(() => undefined, 16, reader);
  clock = 6000;
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec 6300000\nnr_throttled 3\n');
  t.equal(undef(), 3);
  // The overlapping step stays off where the quota is throttled, though the host idles 10 cores.
  clock = 7000; host = { idle: 4030, total: 8000 };
  const spare = spareCore(() => 3, 4, idleCores(() => host, 16, reader), 0, () => clock);
  clock = 8000; host = { idle: 5030, total: 9600 };
  write(root, 'sys/fs/cgroup/pod/cpu.stat', 'usage_usec 9000000\nnr_throttled 9\n');
  t.equal(spare(), false);
});

t.test('idle under a v1 quota: cpuacct.usage in ns, throttling from cpu.stat', async (t) => {
  const root = tree(t, {
    'proc/self/cgroup': '4:cpu:/a\n3:cpuacct:/a\n', 'proc/self/mountinfo': HYBRID,
    'sys/fs/cgroup/cpu/a/cpu.cfs_quota_us': '200000', 'sys/fs/cgroup/cpu/a/cpu.cfs_period_us': '100000',
    'sys/fs/cgroup/cpu/a/cpu.stat': 'nr_periods 10\nnr_throttled 0\nthrottled_time 0\n',
    'sys/fs/cgroup/cpuacct/a/cpuacct.usage': '1000000000\n',
  });
  let clock = 0;
  const free = idleCores(() => ({ idle: clock, total: 2 * clock + 1 }), 2, cgroupCpuReader(root, () => clock)!);
  clock = 500;
  write(root, 'sys/fs/cgroup/cpuacct/a/cpuacct.usage', '1250000000');
  t.equal(Math.round(free()! * 100) / 100, 1, 'host: one of 2 idle; quota: 2 less 0.5 used');
  clock = 1000;
  write(root, 'sys/fs/cgroup/cpuacct/a/cpuacct.usage', '2150000000');
  t.equal(Math.round(free()! * 100) / 100, 0.2);
  clock = 1500;
  write(root, 'sys/fs/cgroup/cpu/a/cpu.stat', 'nr_periods 15\nnr_throttled 1\nthrottled_time 2000000\n');
  t.equal(free(), 0, 'throttled');
  // Throttling alone is read where usage is not (a cpuacct hierarchy that does not mirror cpu's).
  write(root, 'proc/self/cgroup', '4:cpu:/a\n3:cpuacct:/\n');
  const only = cgroupCpuReader(root, () => clock)!;
  const free2 = idleCores(() => ({ idle: clock, total: 2 * clock + 1 }), 2, only);
  clock = 2000;
  t.equal(free2(), 1, 'no usage, not throttled: the host\'s reading');
  clock = 2500;
  write(root, 'sys/fs/cgroup/cpu/a/cpu.stat', 'nr_periods 20\nnr_throttled 2\nthrottled_time 4000000\n');
  t.equal(free2(), 0);
});

t.test('starting threads under a quota: the host\'s other processes count against the host, not the quota', async (t) => {
  // 16 CPUs with 10 other processes running; a quota of 4.
  const busyHost = 'cpu  100 0 100 800 0 0 0 0 0 0\nprocs_running 11\n';
  const quota = tree(t, {
    'proc/self/cgroup': '0::/c\n', 'proc/self/mountinfo': V2, 'proc/stat': busyHost,
    'sys/fs/cgroup/c/cpu.max': '400000 100000', 'sys/fs/cgroup/c/cpu.stat': 'usage_usec 10\nnr_throttled 0\n',
  });
  t.equal(cpuLimit(quota, 16), 4);
  t.equal(await startThreads(4, 20, quota, 16), 4, 'six host CPUs free, the quota unused');
  const none = tree(t, { 'proc/stat': busyHost });
  t.equal(await startThreads(4, 20, none, 4), 1, 'without a quota, as before: the 10 others take the 4');
  t.equal(await startThreads(4, 20, tree(t, {}), 4), 4, 'nothing readable: the limit');
});
