import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, api, swarm, tempDir } from '../helpers/cli.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { archiveBytes } from '../helpers/archive-bytes.js';

/**
 * A real hub under `--archive-max 1MiB` (128 KiB files): thousands of tasks rotate the archive many
 * times and it stays bounded on disk; status, /metrics and GET /tasks say what was pruned; a restart
 * replays evict records naming removed files with every id still known, none run twice.
 */

interface View { id: string; state: string; text?: string; error?: { code: string } }
const N = 6000;
const ids = Array.from({ length: N }, (_, i) => `am-${i}`);
const prompt = (id: string) => `${id} ${'p'.repeat(200)}`;
const diskBytes = archiveBytes;

/** Every id final: done with its own echo, or failed SWARM_ERR_RESULT_PRUNED. */
async function check(t: Test, dir: string): Promise<{ done: number; pruned: number; other: number }> {
  const out = { done: 0, pruned: 0, other: 0 };
  for (let i = 0; i < N; i += 1000) {
    const r = await api<{ complete: boolean; tasks: View[] }>(dir, 'POST', '/wait', { ids: ids.slice(i, i + 1000), timeout_ms: 60_000 });
    t.equal(r.complete, true, `tasks ${i}..${i + 999} final`);
    for (const v of r.tasks) {
      if (v.state === 'done' && v.text === `echo: ${prompt(v.id)}`) out.done++;
      else if (v.state === 'failed' && v.error?.code === 'SWARM_ERR_RESULT_PRUNED') out.pruned++;
      else out.other++;
    }
  }
  return out;
}

t.test('swarm up --archive-max: bounded on disk, reported, pruned tasks answered, a restart keeps every id', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  const up = ['up', '-d', '--driver', 'echo', '--agents', '2', '--archive-max', '1MiB', '--retain', '1h,200', '--state-dir', dir];
  let r = swarm(up, { timeoutMs: 60_000 });
  t.equal(r.code, 0, r.stderr);
  let most = 0;
  for (let i = 0; i < N; i += 500) {
    await api(dir, 'POST', '/tasks', { tasks: ids.slice(i, i + 500).map((id) => ({ id, prompt: prompt(id) })) });
    await api(dir, 'POST', '/wait', { ids: ids.slice(i, i + 500), timeout_ms: 60_000 });
    most = Math.max(most, diskBytes(dir));
  }
  // The last evictions: the retention pass runs every second.
  const deadline = Date.now() + 20_000;
  const archived = () => (JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout) as any).journal.retention;
  while (archived().hot_finished > 200 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 200));
  const st = archived();
  t.ok(st.archive.pruned_files >= 10, `${st.archive.pruned_files} files pruned (${st.archive.pruned_bytes} bytes), ${st.archive.files} kept`);
  t.ok(most <= 2 ** 20 && diskBytes(dir) <= 2 ** 20, `at most ${most} bytes on disk of 1 MiB`);
  t.equal(st.archive.max_bytes, 2 ** 20);
  t.notOk(fs.existsSync(path.join(archiveDir(dir), 'results-000001.ndjson')), 'the oldest file is gone');
  const text = swarm(['status', '--state-dir', dir]).stdout;
  t.match(text, /files, .* of 1 MiB \(--archive-max\); \d+ files \(.*\) pruned since start/, 'swarm status says it');
  const metrics = await api<string>(dir, 'GET', '/metrics');
  t.match(metrics, /swarm_archive_pruned_files_total [1-9]/);
  t.match(metrics, /swarm_archive_files [1-9]/);

  const first = await api<View>(dir, 'GET', '/tasks/am-0');
  t.match(first, { id: 'am-0', state: 'failed', error: { code: 'SWARM_ERR_RESULT_PRUNED' } }, 'GET /tasks of a pruned task');
  const again = await api(dir, 'POST', '/tasks', { tasks: [{ id: 'am-0', prompt: 'run me again' }] });
  t.match(again, { accepted: [{ id: 'am-0', duplicate: true, state: 'failed' }] }, 'a pruned id resubmitted: a duplicate');
  const before = await check(t, dir);
  t.equal(before.other, 0, 'no task unknown, open or with another answer');
  t.ok(before.pruned > N / 2 && before.done > 200, `${before.done} done with their result, ${before.pruned} pruned`);

  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  r = swarm(up, { timeoutMs: 60_000 });
  t.equal(r.code, 0, r.stderr);
  const after = await check(t, dir);
  t.same(after, before, 'after a restart: every id answered as before (lost 0)');
  const res = swarm(['results', '--json', '--state-dir', dir]);
  t.match(res.stderr, /note: results archived before results-\d{6}\.ndjson were pruned \(--archive-max\)/, 'swarm results says older results were pruned');
  const results = res.stdout.trim().split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { id: string }).id);
  t.equal(new Set(results).size, results.length, `archived ${results.length}, none twice (duplicated 0)`);
  t.equal((await api<{ tasks: { queued: number } }>(dir, 'GET', '/status')).tasks.queued, 0, 'nothing runs again');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});

t.test('swarm up and swarm hub refuse a bad --archive-max: SWARM_ERR_CONFIG, exit 2', async (t) => {
  for (const cmd of ['up', 'hub']) {
    for (const v of ['10', '512KiB', '1GiB,0', 'lots']) {
      const r = swarm([cmd, '--archive-max', v, '--state-dir', tempDir(t)]);
      t.equal(r.code, 2, `${cmd} --archive-max ${v}: exit 2`);
      t.match(r.stderr, /SWARM_ERR_CONFIG: .*--archive-max/);
      t.equal(r.stderr.split('SWARM_ERR_CONFIG').length, 2, 'the code is named once');
    }
  }
});

const NOBODY = 65534;
const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => fs.existsSync(p));
const root = process.getuid?.() === 0;
/** `swarm ARGS` as uid nobody when root (chmod binds no root process), else as this user. */
function asHubUser(args: string[]) {
  if (!root) return swarm(args, { timeoutMs: 60_000 });
  const r = spawnSync(setpriv!, [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '/usr/bin/env', '-u', 'NODE_OPTIONS', process.execPath, CLI, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

t.test('a read-only results folder (chmod): nothing removed or begun there, the hub goes on archiving, and catches up once writable', { skip: root && !setpriv ? 'needs setpriv (util-linux) to run the hub as another user' : false }, async (t) => {
  const base = tempDir(t);
  fs.chmodSync(base, 0o755);
  const dir = path.join(base, 'state');
  fs.mkdirSync(dir, { mode: 0o700 });
  if (root) fs.chownSync(dir, NOBODY, NOBODY);
  const r = asHubUser(['up', '-d', '--driver', 'echo', '--agents', '2', '--archive-max', '1MiB', '--retain', '1h,100', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  t.teardown(() => { try { fs.chmodSync(archiveDir(dir), 0o700); } catch { /* gone */ } asHubUser(['down', '--state-dir', dir]); });
  const run = async (from: number, n: number) => {
    const batch = Array.from({ length: n }, (_, i) => `ro-${from + i}`);
    for (let i = 0; i < n; i += 500) await api(dir, 'POST', '/tasks', { tasks: batch.slice(i, i + 500).map((id) => ({ id, prompt: prompt(id) })) });
    const w = await api<{ complete: boolean; tasks: View[] }>(dir, 'POST', '/wait', { ids: batch, timeout_ms: 60_000 });
    const bad = w.tasks.filter((v) => !(v.state === 'done' && v.text === `echo: ${prompt(v.id)}`));
    if (!w.complete || bad.length) t.comment(JSON.stringify({ complete: w.complete, bad: bad.length, first: bad[0], w: w.complete === undefined ? w : undefined }).slice(0, 600));
    return w.complete && !bad.length;
  };
  const status = () => (JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout) as any).journal.retention;
  const settle = async (ok: (s: any) => boolean) => { const end = Date.now() + 20_000; while (!ok(status()) && Date.now() < end) await new Promise((res) => setTimeout(res, 200)); return status(); };
  // 1,000: the bound (1 MiB, about 1,900 of these) keeps them all, so each is read back.
  t.ok(await run(0, 1000), '1,000 tasks done');
  await settle((s) => s.hot_finished <= 100);
  const files = archiveFiles(archiveDir(dir)).map(([, f]) => f);
  fs.chmodSync(archiveDir(dir), 0o500);

  t.ok(await run(1000, 4000), 'with the folder read-only: 4,000 more done, each with its result');
  const ro = await settle((s) => s.hot_finished <= 100);
  t.ok(ro.hot_finished <= 100, `eviction went on: ${ro.hot_finished} finished hot, ${ro.evicted} archived`);
  t.ok(ro.archive.prune_errors >= 1, `${ro.archive.prune_errors} prune errors: ${ro.archive.last_prune_error}`);
  t.match(ro.archive.last_prune_error, /EACCES/);
  t.ok(files.every((f) => fs.existsSync(f)), 'nothing removed');
  t.equal(ro.last_error, undefined, 'no eviction pass failed');
  t.match(await api<View>(dir, 'GET', '/tasks/ro-4000'), { state: 'done', text: `echo: ${prompt('ro-4000')}` }, 'a task archived meanwhile reads back');

  fs.chmodSync(archiveDir(dir), 0o700);
  t.ok(await run(5000, 1000), 'writable again: 1,000 more done');
  const back = await settle((s) => s.archive.bytes <= 2 ** 20);
  t.ok(back.archive.bytes <= 2 ** 20 && diskBytes(dir) <= 2 ** 20, `back under the bound: ${diskBytes(dir)} bytes on disk`);
  t.match(await api<View>(dir, 'GET', '/tasks/ro-0'), { state: 'failed', error: { code: 'SWARM_ERR_RESULT_PRUNED' } }, 'the oldest pruned');
  t.equal(asHubUser(['down', '--state-dir', dir]).code, 0);
});
