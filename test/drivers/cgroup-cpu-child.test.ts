/**
 * The cgroup reading in a real cgroup: a child node process joins a v1 cgroup with a quota of one CPU,
 * nested below one with no quota (the root's cpu.cfs_quota_us says -1, so a reading of the root alone
 * sees none), and reports what it reads while it spins at its quota. Needs root and a writable v1
 * cpu hierarchy at /sys/fs/cgroup/cpu: skipped elsewhere, a failure under CI=true (CI runs as root here).
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { missingPrereq } from '../helpers/llama.js';

const CPU = '/sys/fs/cgroup/cpu';
const ACCT = '/sys/fs/cgroup/cpuacct';

/** Moves what a cgroup still holds to the root, then removes it (a few tries: a process just gone may hold it a moment). */
async function remove(root: string, dir: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    try {
      for (const pid of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try { fs.writeFileSync(path.join(root, 'cgroup.procs'), pid); } catch { /* gone */ }
      }
      fs.rmdirSync(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function writable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root';
  try { fs.accessSync(path.join(CPU, 'cgroup.procs'), fs.constants.W_OK); } catch { return `${CPU} is not a writable cgroup v1 cpu hierarchy`; }
  return undefined;
}

const CHILD = `
import fs from 'node:fs';
const [cpuDir, acctDir, threadsUrl, cgroupUrl] = process.argv.slice(1);
try {
  fs.writeFileSync(cpuDir + '/cgroup.procs', String(process.pid));
  if (acctDir) fs.writeFileSync(acctDir + '/cgroup.procs', String(process.pid));
} catch (err) { console.log(JSON.stringify({ join: String(err) })); process.exit(0); }
const threads = await import(threadsUrl);
const cg = await import(cgroupUrl);
const group = cg.cpuCgroup();
const limit = threads.cpuLimit();
const ours = threads.idleCores();
const host = threads.idleCores(undefined, undefined, null);
// The quota's part alone: a host reading that idles every CPU.
let tick = 0;
const quotaOnly = threads.idleCores(() => ({ idle: ++tick, total: tick }), 2);
const reader = cg.cgroupCpuReader();
const a = reader?.();
const end = performance.now() + 1500;
let x = 0;
while (performance.now() < end) x++;
const b = reader?.();
const used = a && b && a.levels[0].usedNs !== undefined ? (b.levels[0].usedNs - a.levels[0].usedNs) / ((b.atMs - a.atMs) * 1e6) : null;
console.log(JSON.stringify({ limit, idle: ours(), hostIdle: host(), quotaIdle: quotaOnly(), levels: group.levels.map((l) => l.dir), quota: group.quota, used,
  throttled: a && b ? b.levels[0].throttled - a.levels[0].throttled : null, spins: x }));
`;

t.test('a child in a nested cgroup with a quota of one CPU reads 1, and under half a core idle while it spins', async (t) => {
  const cannot = writable();
  if (cannot !== undefined && missingPrereq(t, { missing: cannot })) return;
  const name = `swarm-test-${crypto.randomBytes(4).toString('hex')}`;
  const made: [string, string][] = [];
  const mk = (root: string, rel: string): string | undefined => {
    const dir = path.join(root, rel);
    try { fs.mkdirSync(dir); made.unshift([root, dir]); return dir; } catch (err) { return void t.comment(`mkdir ${dir}: ${String(err)}`); }
  };
  let child: ReturnType<typeof spawn> | undefined;
  t.teardown(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((r) => child!.once('exit', r));
    }
    for (const [root, dir] of made) await remove(root, dir);
  });
  const parent = mk(CPU, name);
  const inner = parent && mk(CPU, `${name}/inner`);
  if (!inner) { missingPrereq(t, { missing: `cannot make cgroups under ${CPU}` }); return; }
  try {
    fs.writeFileSync(path.join(inner, 'cpu.cfs_period_us'), '100000');
    fs.writeFileSync(path.join(inner, 'cpu.cfs_quota_us'), '100000');
    // The most weight against the machine's other processes (another bench may be running): the
    // child then runs at its quota, not at what a loaded machine leaves it.
    fs.writeFileSync(path.join(parent, 'cpu.shares'), '262144');
  } catch (err) { missingPrereq(t, { missing: `cannot set a quota: ${String(err)}` }); return; }
  t.equal(fs.readFileSync(path.join(CPU, 'cpu.cfs_quota_us'), 'utf8').trim(), '-1', 'the root has no quota');
  t.equal(fs.readFileSync(path.join(parent, 'cpu.cfs_quota_us'), 'utf8').trim(), '-1', 'nor the parent');
  // cpuacct on its own mount here: the child joins the same path there, so its usage is read too.
  const acct = fs.existsSync(path.join(ACCT, 'cgroup.procs')) && mk(ACCT, name) ? mk(ACCT, `${name}/inner`) : undefined;

  const url = (rel: string): string => new URL(rel, import.meta.url).href;
  child = spawn(process.execPath, ['--input-type=module', '-e', CHILD, inner, acct ?? '',
    url('../../drivers/batched/threads.js'), url('../../drivers/batched/cgroup-cpu.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => child!.kill('SIGKILL'), 30_000);
    child!.once('exit', (c) => { clearTimeout(timer); resolve(c); });
  });
  t.equal(code, 0, 'the child exited');
  const r = JSON.parse(out.trim().split('\n').pop() || '{}') as { join?: string; limit: number; idle: number; hostIdle: number; quotaIdle: number; levels: string[]; quota: number; used: number | null; throttled: number | null };
  if (r.join) { missingPrereq(t, { missing: `cannot join the cgroup: ${r.join}` }); return; }
  t.comment(JSON.stringify(r));
  t.same(r.levels, [inner], 'the quota found at the child\'s own cgroup, below one without');
  t.equal(r.quota, 1);
  t.equal(r.limit, 1, 'cpuLimit: one CPU (the root-only reading said 2)');
  // The host's reading is whatever the machine does meanwhile: the quota's part is what must say it.
  t.ok(r.quotaIdle < 0.5, `idle to the child by its quota ${r.quotaIdle.toFixed(2)} while it spins at it (used ${r.used?.toFixed(2)} CPUs, throttled ${r.throttled} times)`);
  t.ok(r.idle <= Math.min(r.hostIdle, r.quotaIdle) + 0.05, `idle to the child ${r.idle.toFixed(2)}: the smaller of the host's ${r.hostIdle.toFixed(2)} of 2 and the quota's`);
  if (acct) t.ok(r.used !== null && r.used > 0.6 && r.used < 1.2, `its cgroup's usage is read: ${r.used?.toFixed(2)} CPUs`);
});
