import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { alive, api, hubFile, sleep, swarm, tempDir, until } from '../helpers/cli.js';
import { journalResults } from '../helpers/checker.js';
import { missingPrereq } from '../helpers/llama.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';

/**
 * A batch whose evict record the journal refuses stays hot until a pass records it, and that can be
 * long after its archive lines were written. The duplicate window must count from when the tasks
 * left the hot state: counted from the write, a record more than a window late was forgotten by the
 * next pass, and GET /tasks/:id of a task the client had seen done said unknown while the archive
 * held it. A real hub: the state dir a 4 MiB tmpfs that a filler takes whole once the tasks are done
 * (the journal refuses the evict record), its results/ another tmpfs with room (the archive's write
 * goes through); the filler removed more than a window after the write. Root only (mount).
 */

const WINDOW_S = 10;
const N = 150;
interface View { id: string; state: string; text?: string; error?: { code: string } }
interface Status { journal: { disk_full: boolean; disk_full_at?: number; retention: { hot_finished: number; evicted: number; archive: { archived: number } } } }

function mountTmpfs(dir: string, size: string): { missing: string } | object {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? {} : { missing: `needs a tmpfs (root): mount -t tmpfs failed: ${(r.stderr || r.error?.message || '').trim()}` };
}

/** Fill the disk under `file` until it has no room (bounded: 64 MiB). */
function fillDisk(file: string): number {
  const fd = fs.openSync(file, 'w');
  let n = 0;
  try {
    for (const size of [1 << 16, 1 << 10, 1]) {
      const chunk = Buffer.alloc(size, 1);
      for (let i = 0; i < (64 << 20) / size; i++) { try { fs.writeSync(fd, chunk); n += size; } catch { break; } }
    }
  } finally { fs.closeSync(fd); }
  return n;
}

/** Whole archive lines per id. */
function archiveLines(state: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const [, f] of archiveFiles(archiveDir(state))) {
    for (const l of fs.readFileSync(f, 'utf8').split('\n')) {
      const id = /^\{"t":"archived","id":"([^"]+)"/.exec(l)?.[1];
      if (id) m.set(id, (m.get(id) ?? 0) + 1);
    }
  }
  return m;
}

t.test('a batch recorded more than a window after its archive write: every task a client saw done still answers done, none unknown', async (t) => {
  const state = path.join(tempDir(t), 'state');
  if (missingPrereq(t, mountTmpfs(state, '4m'))) return;
  t.teardown(() => { spawnSync('umount', ['-l', state]); });
  const results = archiveDir(state);
  if (missingPrereq(t, mountTmpfs(results, '4m'))) return;
  t.teardown(() => { spawnSync('umount', ['-l', results]); });
  const up = swarm(['up', '-d', '--driver', 'echo', '--agents', '2', '--retain', `${WINDOW_S}s,100000`, '--state-dir', state], { timeoutMs: 60_000 });
  t.equal(up.code, 0, up.stderr);
  const hubPid = hubFile(state)!.pid;
  const status = (): Promise<Status> => api<Status>(state, 'GET', '/status');

  // Long ids: the batch's evict record takes more than the page the journal's last line may leave.
  const ids = Array.from({ length: N }, (_, i) => `late-record-${String(i).padStart(4, '0')}-${'x'.repeat(24)}`);
  const submitted = Date.now();
  const acc = await api<{ accepted?: unknown[] }>(state, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: `prompt ${id}` })) });
  t.equal(acc.accepted?.length, N, 'accepted');
  const w = await api<{ complete: boolean; tasks: View[] }>(state, 'POST', '/wait', { ids, timeout_ms: 30_000 });
  t.equal(w.complete, true, 'all done');
  const allDone = Date.now();
  const seen = new Map(w.tasks.filter((v) => v.state === 'done').map((v) => [v.id, v.text!]));
  t.equal(seen.size, N, 'each shown done with its text');

  // One batch: every task due at the same pass (a pass a second). Finished one by one, under load the
  // tasks straddled a pass, and the first part's refused record held the rest back (nothing new is
  // written while a batch is owed). So the hub is stopped from inside the first task's window until
  // past the last one's, and its first pass after finds them all due; the disk fills meanwhile.
  process.kill(hubPid, 'SIGSTOP');
  const stopped = Date.now();
  t.teardown(() => { try { process.kill(hubPid, 'SIGCONT'); } catch { /* gone */ } });
  t.ok(stopped - submitted < WINDOW_S * 1000, `stopped ${((stopped - submitted) / 1000).toFixed(1)} s after the submission, inside every task's window`);
  const filler = path.join(state, 'filler');
  t.ok(fillDisk(filler) > 0, 'the state dir\'s disk filled');
  await sleep(allDone + WINDOW_S * 1000 + 1000 - Date.now());
  process.kill(hubPid, 'SIGCONT');
  let s = await status();
  t.ok(await until(async () => { s = await status(); return s.journal.retention.archive.archived >= N; }, 30_000, 100), `the archive took the batch (${s.journal.retention.archive.archived} archived)`);
  const written = Date.now();
  // The record is tried after the archive's write is counted; a small write into the journal's last page may succeed after it.
  t.ok(await until(async () => { s = await status(); return s.journal.disk_full_at !== undefined; }, 10_000, 100), 'the journal refused a write for want of space');
  t.same([s.journal.retention.hot_finished, s.journal.retention.evicted], [N, 0], 'its evict record among them: all still hot');

  // More than a window after the write, space frees: the next pass records the batch.
  await sleep(written + (WINDOW_S + 2) * 1000 - Date.now());
  t.equal((await status()).journal.retention.hot_finished, N, 'hot all along (a pass a second owes the record)');
  fs.rmSync(filler);
  t.ok(await until(async () => { s = await status(); return s.journal.retention.hot_finished === 0; }, 30_000, 100), `recorded once space freed (${s.journal.retention.evicted} evicted)`);
  const recorded = Date.now();
  t.ok(recorded - written > WINDOW_S * 1000, `recorded ${((recorded - written) / 1000).toFixed(1)} s after the write, the window ${WINDOW_S} s`);
  // Two passes on: a window counted from the write was pruned by the first.
  await sleep(2500);

  const c = { same: 0, unknown: 0, lost: 0, changed: 0, details: [] as string[] };
  const back = await api<{ tasks?: View[]; code?: string; error?: { code?: string } }>(state, 'POST', '/wait', { ids, timeout_ms: 1000 });
  // An id it does not know fails the whole request (SWARM_ERR_UNKNOWN_TASK).
  if (!back.tasks) { c.unknown = N; c.details.push(`/wait: ${back.code ?? back.error?.code ?? JSON.stringify(back).slice(0, 80)}`); }
  for (const v of back.tasks ?? []) {
    if (v.state === 'done' && v.text === seen.get(v.id)) c.same++;
    else if (v.state === 'done') c.changed++;
    else if (v.state === 'unknown' || v.error?.code === 'SWARM_ERR_UNKNOWN_TASK') c.unknown++;
    else { c.lost++; if (c.details.length < 3) c.details.push(`${v.id} ${v.state} ${v.error?.code ?? ''}`); }
  }
  const asked = Date.now() - recorded;
  t.ok(asked < WINDOW_S * 1000, `asked ${(asked / 1000).toFixed(1)} s after the record, inside the window`);
  t.same({ same: c.same, unknown: c.unknown, lost: c.lost, changed: c.changed }, { same: N, unknown: 0, lost: 0, changed: 0 }, `/wait: each done with the text shown, from the archive; ${c.details.join('; ')}`);
  const g = await api<View & { code?: string }>(state, 'GET', `/tasks/${ids[0]}`);
  t.same([g.state, g.text], ['done', seen.get(ids[0]!)], `GET /tasks/:id answers done with its text (${g.code ?? g.state})`);
  const dup = [...archiveLines(state).values()].filter((n) => n !== 1).length + [...journalResults(state).values()].filter((n) => n > 1).length;
  t.same([archiveLines(state).size, dup], [N, 0], 'each archived once, each result journaled once: duplicated 0');
  t.ok(alive(hubPid) && hubFile(state)?.pid === hubPid, 'the same hub throughout');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
});
