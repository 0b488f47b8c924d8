import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { alive, api, hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { journalResults } from '../helpers/checker.js';
import { missingPrereq } from '../helpers/llama.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { archiveBytes } from '../helpers/archive-bytes.js';

/**
 * The results archive on a real full disk under `--archive-max`: a 2 MiB tmpfs mounted as the
 * state's results folder, a filler file on it, an echo swarm given tasks of about 6 KB each until the
 * disk has no room. Once with the bound under the disk (1 MiB: the filler leaves less than that) and
 * once over it (64 MiB). The hub must stay up; every task a client saw finish must read back the same
 * (hot or archived) or answer SWARM_ERR_RESULT_PRUNED (its file removed by the bound), never another
 * answer; none lost, none archived twice; status says the archive's writes fail for want of space;
 * and once the filler goes archiving resumes without a restart. Then the archive is damaged by hand
 * (an older file cut mid-line, garbage appended to the newest) and the hub restarted: it starts, says
 * what it found, and every task outside the damage answers as before. Last, the whole state dir on
 * one full disk (journal, archive and log): new work refused, nothing accepted lost, all resumed.
 */

interface ArchiveJson {
  files: number; bytes: number; archived: number; write_errors: number; disk_full: boolean; last_error?: string;
  max_bytes: number; pruned_files: number; torn_tail?: { file: string; offset: number; bytes: number };
  damaged?: { file: string; why: string }[];
}
interface Status { tasks: { queued: number; leased: number }; journal: { disk_full: boolean; retention: { hot_finished: number; evicted: number; archive: ArchiveJson } } }
interface View { id: string; state: string; text?: string; error?: { code: string; msg?: string } }

const MiB = 2 ** 20;
const HOT = 20;
const PAD = 'x'.repeat(3000);
const prompt = (id: string): string => `${id} ${PAD}`;
const echo = (id: string): string => `echo: ${prompt(id)}`;

/** Mount a tmpfs of `size` on `dir` (made if missing), or why it cannot be done. */
function mountTmpfs(dir: string, size: string): { missing: string } | object {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? {} : { missing: `needs a tmpfs (root): mount -t tmpfs failed: ${(r.stderr || r.error?.message || '').trim()}` };
}

const status = (state: string): Promise<Status> => api<Status>(state, 'GET', '/status');
const statusJson = (state: string): Status => JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout) as Status;
const diskBytes = archiveBytes;

/** Lines per id in the archive files as they are on disk (whole lines only). */
function archiveLines(state: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const [, f] of archiveFiles(archiveDir(state))) {
    for (const l of fs.readFileSync(f, 'utf8').split('\n')) {
      const id = /^\{"t":"archived","id":"([^"]+)"/.exec(l)?.[1];
      if (id && l.endsWith('}')) m.set(id, (m.get(id) ?? 0) + 1);
    }
  }
  return m;
}

/** What clients were shown, and the counts every check reports. */
class Seen {
  readonly done = new Map<string, string>();
  /** Submit and wait for `ids` (all accepted, all done), recording each text shown. */
  async run(t: Test, state: string, ids: string[]): Promise<void> {
    const acc = await api<{ accepted?: { id: string }[] }>(state, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: prompt(id) })) });
    t.equal(acc.accepted?.length, ids.length, `${ids[0]}..: accepted`);
    const w = await api<{ complete: boolean; tasks: View[] }>(state, 'POST', '/wait', { ids, timeout_ms: 60_000 });
    t.equal(w.complete, true, `${ids[0]}..: finished`);
    for (const v of w.tasks) if (v.state === 'done' && v.text !== undefined) this.done.set(v.id, v.text);
  }

  /**
   * Submit `ids` where the journal's disk may be full too: refused (SWARM_ERR_DISK_FULL) or accepted;
   * the accepted ones waited for `ms` and those done recorded. Returns the accepted ids, or the code.
   */
  async attempt(state: string, ids: string[], ms: number): Promise<{ accepted: string[]; refused?: string }> {
    const acc = await api<{ accepted?: { id: string }[]; code?: string; error?: { code?: string } }>(state, 'POST', '/tasks', { tasks: ids.map((id) => ({ id, prompt: prompt(id) })) });
    if (!acc.accepted) return { accepted: [], refused: acc.code ?? acc.error?.code ?? JSON.stringify(acc).slice(0, 80) };
    const w = await api<{ tasks: View[] }>(state, 'POST', '/wait', { ids, timeout_ms: ms });
    for (const v of w.tasks) if (v.state === 'done' && v.text !== undefined) this.done.set(v.id, v.text);
    return { accepted: acc.accepted.map((a) => a.id) };
  }

  /** Read every task shown done back: the same text, or SWARM_ERR_RESULT_PRUNED; anything else is lost or changed. */
  async check(state: string, damaged: ReadonlySet<string> = new Set()): Promise<{ same: number; pruned: number; damaged: number; lost: number; changed: number; details: string[] }> {
    const out = { same: 0, pruned: 0, damaged: 0, lost: 0, changed: 0, details: [] as string[] };
    const ids = [...this.done.keys()];
    for (let i = 0; i < ids.length; i += 500) {
      const w = await api<{ complete: boolean; tasks: View[] }>(state, 'POST', '/wait', { ids: ids.slice(i, i + 500), timeout_ms: 1000 });
      for (const v of w.tasks) {
        const shown = this.done.get(v.id)!;
        if (v.state === 'done' && v.text === shown && shown === echo(v.id)) out.same++;
        else if (v.state === 'failed' && v.error?.code === 'SWARM_ERR_RESULT_PRUNED') (damaged.has(v.id) ? out.damaged++ : out.pruned++);
        else if (v.state === 'done') { out.changed++; if (out.details.length < 5) out.details.push(`${v.id} done with ${JSON.stringify(v.text)?.slice(0, 40)}`); }
        else { out.lost++; if (out.details.length < 5) out.details.push(`${v.id} ${v.state} ${v.error?.code ?? ''}`); }
      }
    }
    // One GET too: the same answer as /wait.
    const one = ids[0]!;
    const g = await api<View>(state, 'GET', `/tasks/${one}`);
    if (!(g.state === 'done' ? g.text === this.done.get(one) : g.error?.code === 'SWARM_ERR_RESULT_PRUNED')) { out.lost++; out.details.push(`GET ${one}: ${g.state}`); }
    return out;
  }
}

/** Lines archived more than once, and result records journaled more than once. */
function duplicated(state: string): number {
  let n = 0;
  for (const c of archiveLines(state).values()) if (c > 1) n++;
  for (const c of journalResults(state).values()) if (c > 1) n++;
  return n;
}

/**
 * A swarm whose results folder is a 2 MiB tmpfs holding `filler` bytes, under `--archive-max bound`:
 * tasks until the archive's writes fail for want of space, then the filler removed. Returns the state
 * dir and what clients saw, the swarm still up.
 */
async function fillAndFree(t: Test, bound: string, filler: number, tasks: number): Promise<{ state: string; seen: Seen; hubPid: number } | undefined> {
  const state = path.join(tempDir(t), 'state');
  const results = archiveDir(state);
  if (missingPrereq(t, mountTmpfs(results, '2m'))) return undefined;
  // Registered first, so it runs last: after the swarm (tempDir's teardown) is down. Lazy: always gone.
  t.teardown(() => { spawnSync('umount', ['-l', results]); });
  const fill = path.join(results, 'filler');
  fs.writeFileSync(fill, Buffer.alloc(filler, 1));
  const up = ['up', '-d', '--driver', 'echo', '--agents', '2', '--archive-max', bound, '--retain', `1h,${HOT}`, '--state-dir', state];
  const r = swarm(up, { timeoutMs: 60_000 });
  t.equal(r.code, 0, r.stderr);
  const hubPid = hubFile(state)!.pid;

  const seen = new Seen();
  let n = 0;
  let s = await status(state);
  // Batches of 25 (about 160 KB of archive lines) until a write failed for want of space; bounded.
  for (let b = 0; b < Math.ceil(tasks / 25) && !s.journal.retention.archive.disk_full; b++) {
    await seen.run(t, state, Array.from({ length: 25 }, () => `fd-${n++}`));
    await until(async () => { s = await status(state); return s.journal.retention.hot_finished <= HOT || s.journal.retention.archive.disk_full; }, 10_000, 100);
  }
  t.ok(await until(async () => (s = await status(state)).journal.retention.archive.disk_full, 20_000, 100), `the archive's writes fail for want of space after ${n} tasks`);
  const full = s.journal.retention;
  t.ok(full.archive.archived > 0, `${full.archive.archived} archived before the disk filled`);
  t.ok(full.hot_finished > HOT, `${full.hot_finished} finished tasks stay hot past the horizon of ${HOT}`);
  t.ok(full.archive.write_errors > 0 && /ENOSPC/.test(full.archive.last_error ?? ''), `write errors counted (${full.archive.write_errors}), the last named: ${full.archive.last_error}`);
  t.equal(s.journal.disk_full, false, 'the journal (another disk) is not full: new work is still accepted');

  // What status says, both ways.
  const json = statusJson(state);
  t.equal(json.journal.retention.archive.disk_full, true, 'status --json: disk_full');
  t.ok(json.journal.retention.archive.write_errors > 0, 'status --json: write_errors');
  const text = swarm(['status', '--state-dir', state]).stdout;
  t.match(text, /archive .*DISK FULL: finished tasks stay hot until space frees/, 'status says the archive\'s disk is full');
  t.match(text, /\d+ archive writes? failed since start \(last: ENOSPC/, 'and how many writes failed, with the last error');
  const metrics = await api<string>(state, 'GET', '/metrics');
  t.match(metrics, /swarm_archive_disk_full 1/);

  // More work while full: accepted, run, kept hot; the hub does not spin (a pass a second, one task a try).
  await seen.run(t, state, Array.from({ length: 25 }, () => `fd-${n++}`));
  const e0 = (await status(state)).journal.retention.archive.write_errors;
  await new Promise((res) => setTimeout(res, 3000));
  const e1 = (await status(state)).journal.retention.archive.write_errors;
  t.ok(e1 - e0 <= 10, `failed writes retried at a bounded rate: ${e1 - e0} in 3 s`);
  let c = await seen.check(state);
  t.same({ lost: c.lost, changed: c.changed }, { lost: 0, changed: 0 }, `while full: ${c.same} read back the same, ${c.pruned} pruned; ${c.details.join('; ')}`);
  t.ok(alive(hubPid) && hubFile(state)?.pid === hubPid, 'the hub is up, the same process');

  // Space frees: archiving resumes, no restart.
  const before = (await status(state)).journal.retention.archive.archived;
  fs.rmSync(fill);
  t.ok(await until(async () => { s = await status(state); return !s.journal.retention.archive.disk_full && s.journal.retention.hot_finished <= HOT; }, 30_000, 200),
    `archiving resumed: ${s.journal.retention.archive.archived - before} more archived, ${s.journal.retention.hot_finished} hot`);
  t.match(swarm(['status', '--state-dir', state]).stdout, /archive .*archived since start(?!.*DISK FULL)/, 'status no longer says DISK FULL');
  await seen.run(t, state, Array.from({ length: 25 }, () => `fd-${n++}`));
  c = await seen.check(state);
  t.same({ lost: c.lost, changed: c.changed }, { lost: 0, changed: 0 }, `after: ${c.same} read back the same, ${c.pruned} pruned; ${c.details.join('; ')}`);
  t.equal(duplicated(state), 0, 'duplicated 0: no id archived twice, no result journaled twice');
  t.ok(alive(hubPid) && hubFile(state)?.pid === hubPid, 'the same hub throughout');
  return { state, seen, hubPid };
}

t.test('--archive-max under the disk (1 MiB of 2 MiB, a filler takes the rest): full, then freed; nothing lost', async (t) => {
  const r = await fillAndFree(t, '1MiB', 1.25 * MiB, 600);
  if (!r) return;
  const { state, seen } = r;
  t.ok(diskBytes(state) <= MiB, `the bound holds once there is room: ${diskBytes(state)} bytes on disk`);

  // Damage, with the hub down: an older file cut mid-line, garbage appended to the newest.
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  const files = archiveFiles(archiveDir(state));
  t.ok(files.length >= 3, `${files.length} archive files`);
  const [cutN, cutFile] = files[files.length - 2]!;
  const size = fs.statSync(cutFile).size;
  const cutAt = Math.floor(size / 2);
  const cutIds = new Set([...fs.readFileSync(cutFile, 'utf8').slice(cutAt).matchAll(/"t":"archived","id":"([^"]+)"/g)].map((m) => m[1]!));
  // The line the cut falls in loses its end too.
  const head = fs.readFileSync(cutFile).subarray(0, cutAt);
  const torn = /"t":"archived","id":"([^"]+)"/.exec(head.subarray(head.lastIndexOf(10) + 1).toString())?.[1];
  if (torn) cutIds.add(torn);
  fs.truncateSync(cutFile, cutAt);
  const [, last] = files.at(-1)!;
  const lastSize = fs.statSync(last).size;
  // Whole lines that are not archive lines (one claims a task: no checksum), then a torn tail.
  const junk = 'garbage\n{"id":"fd-0","t":"archived","state":"done"}\n', tail = '\u0000\u0001 not a line';
  fs.appendFileSync(last, junk + tail);
  t.ok(cutIds.size > 0, `${cutIds.size} tasks' lines cut from results-${cutN}`);

  const up = swarm(['up', '-d', '--driver', 'echo', '--agents', '2', '--archive-max', '1MiB', '--retain', `1h,${HOT}`, '--state-dir', state], { timeoutMs: 60_000 });
  t.equal(up.code, 0, `the hub starts on a damaged archive: ${up.stderr}`);
  const a = statusJson(state).journal.retention.archive;
  t.same(a.torn_tail, { file: last, offset: lastSize + Buffer.byteLength(junk), bytes: Buffer.byteLength(tail) }, 'status --json: the torn tail cut');
  t.ok(a.damaged?.some((d) => d.file === last && /2 damaged lines/.test(d.why)), 'and the damaged lines before it');
  t.ok(a.damaged?.some((d) => d.file.endsWith(path.basename(cutFile)) && /mid-line|cut/.test(d.why)), `status --json names the cut file: ${JSON.stringify(a.damaged)}`);
  const text = swarm(['status', '--state-dir', state]).stdout;
  t.match(text, new RegExp(`${path.basename(cutFile)}`), 'the status text names it');
  const log = fs.readFileSync(path.join(state, 'logs', 'hub.log'), 'utf8');
  t.match(log, new RegExp(`"level":40.*${path.basename(cutFile)}`), 'the hub logged a warning naming it');

  const c = await seen.check(state, cutIds);
  t.same({ lost: c.lost, changed: c.changed }, { lost: 0, changed: 0 }, `after the damage: ${c.same} the same, ${c.pruned} pruned, ${c.damaged} of the ${cutIds.size} cut answer SWARM_ERR_RESULT_PRUNED; ${c.details.join('; ')}`);
  t.equal(c.same + c.pruned + c.damaged, seen.done.size, 'every task shown done answers');
  const g = await api<View>(state, 'GET', `/tasks/${[...cutIds].find((id) => seen.done.has(id)) ?? [...cutIds][0]}`);
  t.match(g, { state: 'failed', error: { code: 'SWARM_ERR_RESULT_PRUNED', msg: /damaged|cut|missing/ } }, 'a cut task answers pruned, saying its line is damaged');
  // Work goes on past the garbage: new lines are archived whole and read back.
  const more = Array.from({ length: 40 }, (_, i) => `fd-after-${i}`);
  await seen.run(t, state, more);
  t.ok(await until(async () => (await status(state)).journal.retention.hot_finished <= HOT, 20_000, 200), 'archived after the restart');
  const after = await seen.check(state, cutIds);
  t.same({ lost: after.lost, changed: after.changed }, { lost: 0, changed: 0 }, `${after.same} the same, ${after.pruned} pruned; ${after.details.join('; ')}`);
  t.equal(duplicated(state), 0, 'duplicated 0');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
});

t.test('--archive-max over the disk (64 MiB on 2 MiB): the disk fills, the hub stays up, the filler freed resumes archiving', async (t) => {
  const r = await fillAndFree(t, '64MiB', 1 * MiB, 400);
  if (!r) return;
  const a = (await status(r.state)).journal.retention.archive;
  t.equal(a.pruned_files, 0, 'nothing pruned: the bound was never reached');
  t.equal(swarm(['down', '--state-dir', r.state]).code, 0);
});

t.test('the newest archive file cut below what the journal covers: the hub starts, says so, the cut tasks answer pruned, nothing else is lost', async (t) => {
  const state = path.join(tempDir(t), 'state');
  const up = ['up', '-d', '--driver', 'echo', '--agents', '2', '--retain', '1h,5', '--state-dir', state];
  t.equal(swarm(up, { timeoutMs: 60_000 }).code, 0);
  const seen = new Seen();
  await seen.run(t, state, Array.from({ length: 40 }, (_, i) => `cut-${i}`));
  t.ok(await until(async () => (await status(state)).journal.retention.hot_finished <= 5, 20_000, 100), '35 archived');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  const [, last] = archiveFiles(archiveDir(state)).at(-1)!;
  const text = fs.readFileSync(last, 'utf8');
  const cutAt = text.indexOf('\n', Math.floor(text.length / 2)) + 1;
  const cutIds = new Set([...text.slice(cutAt).matchAll(/"t":"archived","id":"([^"]+)"/g)].map((m) => m[1]!));
  fs.truncateSync(last, cutAt);
  t.ok(cutIds.size > 5, `${cutIds.size} lines cut from the newest file, at a line's start`);

  t.equal(swarm(up, { timeoutMs: 60_000 }).code, 0, 'the hub starts');
  const a = statusJson(state).journal.retention.archive;
  t.ok(a.damaged?.some((d) => d.file === last && /shorter than the journal says: \d+ of \d+ bytes/.test(d.why)), `status --json says so: ${JSON.stringify(a.damaged)}`);
  let c = await seen.check(state, cutIds);
  t.same({ lost: c.lost, changed: c.changed, damaged: c.damaged, pruned: c.pruned }, { lost: 0, changed: 0, damaged: cutIds.size, pruned: 0 }, `${c.same} the same, the ${cutIds.size} cut answer SWARM_ERR_RESULT_PRUNED; ${c.details.join('; ')}`);
  // Said once: the journal now has the real end, so the next start finds nothing to say.
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.equal(swarm(up, { timeoutMs: 60_000 }).code, 0, 'a second start');
  const again = statusJson(state).journal.retention.archive.damaged;
  t.equal(again, undefined, `nothing new to say about the archive: ${JSON.stringify(again)}`);
  // New lines go where the cut lines were: each is read as its own task, never as an old one.
  await seen.run(t, state, Array.from({ length: 40 }, (_, i) => `cut-after-${i}`));
  t.ok(await until(async () => (await status(state)).journal.retention.hot_finished <= 5, 20_000, 100), 'archived after the cut');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  t.equal(swarm(up, { timeoutMs: 60_000 }).code, 0, 'and again after a restart');
  c = await seen.check(state, cutIds);
  t.same({ lost: c.lost, changed: c.changed, damaged: c.damaged }, { lost: 0, changed: 0, damaged: cutIds.size }, `${c.same} the same; ${c.details.join('; ')}`);
  t.equal(duplicated(state), 0, 'duplicated 0');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
});

t.test('the whole state dir on a full disk (journal, archive and log on 3 MiB) under --archive-max 1MiB: refused or kept, never lost; freed, it all resumes', async (t) => {
  const state = path.join(tempDir(t), 'state');
  if (missingPrereq(t, mountTmpfs(state, '3m'))) return;
  t.teardown(() => { spawnSync('umount', ['-l', state]); });
  const fill = path.join(state, 'filler');
  fs.writeFileSync(fill, Buffer.alloc(1.5 * MiB, 1));
  const up = ['up', '-d', '--driver', 'echo', '--agents', '2', '--archive-max', '1MiB', '--retain', `1h,${HOT}`, '--state-dir', state];
  const r = swarm(up, { timeoutMs: 60_000 });
  t.equal(r.code, 0, r.stderr);
  const hubPid = hubFile(state)!.pid;
  const seen = new Seen();
  const accepted = new Set<string>();
  let n = 0, refused: string | undefined, s = await status(state);
  // Past the archive's first failed write, until the journal refuses new work (bounded: 60 batches).
  let archiveFull = false;
  for (let b = 0; b < 60 && !refused; b++) {
    const a = await seen.attempt(state, Array.from({ length: 25 }, () => `sd-${n++}`), 10_000);
    for (const id of a.accepted) accepted.add(id);
    refused = a.refused;
    s = await status(state);
    archiveFull ||= s.journal.retention.archive.disk_full;
  }
  // Which of the two writers meets the full disk first is a race (the archive's batches or the journal's appends).
  t.equal(refused, 'SWARM_ERR_DISK_FULL', `the journal refused new work after ${accepted.size} accepted (the archive's writes ${archiveFull ? 'had failed too' : 'had not failed yet'})`);
  t.ok(alive(hubPid) && hubFile(state)?.pid === hubPid, 'the hub is up on a full disk');
  const text = swarm(['status', '--state-dir', state]);
  t.equal(text.code, 0, 'swarm status answers');
  // The archive's pruning beside it may have freed space since: then it says the disk was full.
  t.match(text.stdout, /DISK FULL|DISK WAS FULL \d+ s ago/, `and says DISK FULL (or that it was, moments ago)`);
  let c = await seen.check(state);
  t.same({ lost: c.lost, changed: c.changed }, { lost: 0, changed: 0 }, `while full: ${c.same} the same, ${c.pruned} pruned; ${c.details.join('; ')}`);

  fs.rmSync(fill);
  const more = Array.from({ length: 25 }, () => `sd-${n++}`);
  t.ok(await until(async () => !(await seen.attempt(state, more, 1)).refused, 30_000, 500), 'new work accepted once space frees');
  for (const id of more) accepted.add(id);
  const w = await api<{ complete: boolean; tasks: View[] }>(state, 'POST', '/wait', { ids: [...accepted], timeout_ms: 60_000 });
  t.equal(w.complete, true, `every one of the ${accepted.size} accepted tasks finished`);
  for (const v of w.tasks) if (v.state === 'done' && v.text !== undefined && !seen.done.has(v.id)) seen.done.set(v.id, v.text);
  t.ok(await until(async () => { s = await status(state); return !s.journal.disk_full && !s.journal.retention.archive.disk_full && s.journal.retention.hot_finished <= HOT; }, 30_000, 200),
    `archiving resumed with no restart: ${s.journal.retention.archive.archived} archived, ${s.journal.retention.hot_finished} hot`);
  c = await seen.check(state);
  t.same({ lost: c.lost, changed: c.changed }, { lost: 0, changed: 0 }, `after: ${c.same} the same, ${c.pruned} pruned of ${seen.done.size}; ${c.details.join('; ')}`);
  t.equal(c.same + c.pruned, accepted.size, 'every accepted task is accounted for');
  t.equal(duplicated(state), 0, 'duplicated 0');
  t.ok(diskBytes(state) <= MiB, `the bound holds: ${diskBytes(state)} bytes of archive`);
  t.ok(alive(hubPid) && hubFile(state)?.pid === hubPid, 'the same hub throughout');
  t.equal(swarm(['down', '--state-dir', state]).code, 0);
});
