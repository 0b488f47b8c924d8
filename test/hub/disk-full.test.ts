import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { api, hubFile, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';
import { Checker, journalResults, type FinalTask } from '../helpers/checker.js';

/** Mount a tmpfs of `size` on `dir`; the reason it cannot be done, or undefined. */
function mountTmpfs(dir: string, size: string): string | undefined {
  fs.mkdirSync(dir, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? undefined : `mount -t tmpfs failed: ${(r.stderr || r.error?.message || '').trim()}`;
}

const umount = (dir: string): void => { spawnSync('umount', ['-l', dir]); };

interface Status { tasks: { queued: number; leased: number; done: number; failed: number }; journal?: { disk_full: boolean; write_errors: number } }

async function post(state: string, p: string, body: unknown): Promise<{ status: number; json: any }> {
  const h = hubFile(state)!;
  const res = await fetch(`http://${h.control.host}:${h.control.port}${p}`, {
    method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...(h.token ? { authorization: `Bearer ${h.token}` } : {}) },
  });
  return { status: res.status, json: await res.json() };
}

t.test('a full disk during submit and during results: the hub refuses with a clear code, keeps serving, resumes; nothing told is lost', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  const why = mountTmpfs(state, '3m');
  if (why) {
    if (process.env.CI === 'true') { t.fail(why); return; }
    t.plan(0, `skipped: needs a tmpfs: ${why}`);
    return;
  }
  // Teardowns run last-registered first: the swarm is stopped (below) before the tmpfs goes.
  t.teardown(() => umount(state));
  // Ballast to free later, as an operator would free space.
  fs.writeFileSync(path.join(state, 'ballast'), Buffer.alloc(600 * 1024, 1));
  const hub = swarmBg(['hub', '--state-dir', state, '--log-file', path.join(state, 'logs', 'hub.log'), '--heartbeat-ms', '200', '--dead-after-ms', '3000']);
  t.teardown(async () => {
    swarm(['down', '--state-dir', state]);
    try { process.kill(-hub.child.pid!, 'SIGKILL'); } catch { /* gone */ }
  });
  t.ok(await until(() => hubFile(state)?.pid === hub.child.pid, 60_000), 'hub up on a 3 MB tmpfs');

  const check = new Checker();
  const pad = 'x'.repeat(2000);
  const prompt = (id: string) => `${id} ${pad}`;
  // Submit until the disk is full (no workers yet: results come later).
  let refusedWith: string | undefined;
  let n = 0;
  for (let b = 0; b < 400 && !refusedWith; b++) {
    const ids = Array.from({ length: 20 }, () => `t-${n++}`);
    const r = await post(state, '/tasks', { tasks: ids.map((id) => ({ id, prompt: prompt(id) })) });
    if (r.status === 202) check.acceptedIds(ids);
    else { check.refusedIds(ids, r.json.code); refusedWith = `${r.status} ${r.json.code}`; }
  }
  t.equal(refusedWith, '507 SWARM_ERR_DISK_FULL', 'a full disk refuses new work with its own code');
  const accepted = check.counts.accepted;
  t.ok(accepted > 100, `${accepted} tasks accepted before the disk filled`);
  const health = await fetch(`http://${hubFile(state)!.control.host}:${hubFile(state)!.control.port}/healthz`);
  t.equal(health.status, 200, '/healthz answers on a full disk');
  const st = await api<Status>(state, 'GET', '/status');
  t.equal(st.tasks.queued, accepted, 'status answers; the refused batch left no trace in the queue');
  t.equal(st.journal?.disk_full, true, 'status says the disk is full');

  // Free a little space, then let workers run: the results fill the disk again mid-run.
  fs.rmSync(path.join(state, 'ballast'));
  const workers = swarmBg(['worker', '--count', '4', '--id', 'df', '--state-dir', state, '--driver', 'echo']);
  t.teardown(() => { try { process.kill(-workers.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).journal?.disk_full === true
    && (await api<Status>(state, 'GET', '/status')).tasks.done > 0, 60_000, 100), 'results filled the disk again');
  const mid = await api<Status>(state, 'GET', '/status');
  t.ok(mid.tasks.done < accepted, `${mid.tasks.done}/${accepted} done while the disk is full`);
  const ids = Array.from({ length: accepted }, (_, i) => `t-${i}`);
  const w = await post(state, '/wait', { ids, timeout_ms: 1 });
  t.equal(w.status, 200, '/wait answers on a full disk');
  for (const task of w.json.tasks as FinalTask[]) if (task.state === 'done') check.sawDone(task.id, task.text!);
  t.equal(check.counts.seen, (w.json.tasks as FinalTask[]).filter((x) => x.state === 'done').length);
  t.ok(hub.child.exitCode === null && workers.child.exitCode === null, 'hub and workers are alive');

  // Space frees (the tmpfs grows): everything accepted finishes, new work is accepted again.
  t.equal(spawnSync('mount', ['-o', 'remount,size=64m', state]).status, 0, 'tmpfs grown');
  const more = Array.from({ length: 10 }, (_, i) => `after-${i}`);
  t.ok(await until(async () => (await post(state, '/tasks', { tasks: more.map((id) => ({ id, prompt: prompt(id) })) })).status === 202, 30_000, 200), 'new work accepted once space frees');
  check.acceptedIds(more);
  const all = [...ids, ...more];
  const fin = await post(state, '/wait', { ids: all, timeout_ms: 120_000 });
  t.equal(fin.json.complete, true, 'every accepted task finished');

  // The final state, read back by a fresh hub from the journal alone.
  swarm(['down', '--state-dir', state]);
  try { process.kill(-workers.child.pid!, 'SIGKILL'); } catch { /* gone */ }
  const hub2 = swarmBg(['hub', '--state-dir', state]);
  t.teardown(() => { try { process.kill(-hub2.child.pid!, 'SIGKILL'); } catch { /* gone */ } });
  t.ok(await until(() => hubFile(state)?.pid === hub2.child.pid, 60_000), 'hub restarted on the journal');
  const refusedIds = Array.from({ length: n - accepted }, (_, i) => `t-${accepted + i}`);
  const final: FinalTask[] = [];
  for (const id of [...all, ...refusedIds]) {
    const h = hubFile(state)!;
    const res = await fetch(`http://${h.control.host}:${h.control.port}/tasks/${id}`, { headers: h.token ? { authorization: `Bearer ${h.token}` } : {} });
    if (res.status === 200) final.push(await res.json() as FinalTask);
  }
  const v = check.check(final, { expect: (id) => `echo: ${prompt(id)}`, resultRecords: journalResults(state), mustFinish: true });
  t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed, unexpected: v.unexpected }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0 }, v.details.join('; '));
});
