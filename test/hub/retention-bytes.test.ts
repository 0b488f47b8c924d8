import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { TaskStore } from '../../hub/store.js';
import { readArchive } from '../../hub/archive-read.js';
import type { ArchivedTask } from '../../hub/archive.js';
import { Retention, firstPassDelay, hotCeiling, parseBytes, parseRetain, type RetainOptions } from '../../hub/retention.js';
import { formatBytes } from '../../protocol/bytes.js';
import { RECORD_BYTES } from '../../hub/retention-bytes.js';
import { api, swarm, tempDir, until } from '../helpers/cli.js';

const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const w = { id: 'w', caps: [] as string[] };
const HOUR = 3600_000;

/** A prompt of exactly `n` ASCII characters for task `id`. */
const promptOf = (id: string, n: number) => `${id} `.padEnd(n, 'x');

/** Submit and run to a result, one task after another (so they finish in this order), the result as long as the prompt. */
async function runAll(s: TaskStore, tasks: { id: string; prompt: string }[], text = (p: string) => p.toUpperCase()): Promise<void> {
  for (const task of tasks) {
    await s.submitMany([task]);
    const rec = s.lease(w)!;
    await s.complete(rec.id, { text: text(rec.spec.prompt), worker: 'w', attempt: rec.attempts });
  }
}

const archived = (dir: string): ArchivedTask[] => { const out: ArchivedTask[] = []; readArchive(dir, {}, (a) => out.push(a)); return out; };

/** Every id: hot and done, or archived; never both, never twice (lost / duplicated counted apart). */
function account(t: Test, s: TaskStore, dir: string, ids: string[]): { hot: string[]; archived: string[] } {
  const arch = archived(dir).map((a) => a.id);
  const hot = ids.filter((id) => s.queue.get(id)?.state === 'done');
  const lost = ids.filter((id) => !hot.includes(id) && !arch.includes(id));
  const twice = ids.filter((id) => arch.filter((x) => x === id).length + (hot.includes(id) ? 1 : 0) > 1);
  t.same(lost, [], 'lost 0');
  t.same(twice, [], 'duplicated 0 (none archived twice, none archived and hot)');
  return { hot, archived: arch };
}

t.test('the bytes bound evicts the oldest finished tasks first; the archive keeps them; the window answers them', async (t) => {
  const dir = tempDir(t);
  // A task here holds 1,000 + 1,000 characters and its record: 5 fit in the bound, the 6th passes it.
  const per = 2000 + RECORD_BYTES;
  const retain: RetainOptions = { ageMs: HOUR, count: 1000, bytes: 5 * per + per / 2 };
  const s = await TaskStore.open(dir, q, j, { retain, evictEveryMs: HOUR });
  const ids = Array.from({ length: 12 }, (_, i) => `b${i}`);
  await runAll(s, ids.map((id) => ({ id, prompt: promptOf(id, 1000) })));
  t.equal(s.retention.hot_bytes, 12 * per, 'the total counts every finished task');
  t.equal(await s.evict(), 7, 'seven leave');
  t.equal(s.retention.hot_bytes, 5 * per, 'five stay, under the bound');
  t.same(ids.filter((id) => s.queue.has(id)), ids.slice(7), 'the newest stay: the oldest left first');
  const { archived: arch } = account(t, s, dir, ids);
  t.same(arch, ids.slice(0, 7), 'archived oldest first');

  // Inside the duplicate window an archived id is still answered by id.
  const [again] = await s.submitMany([{ id: 'b0', prompt: promptOf('b0', 1000) }]);
  t.ok(again!.duplicate, 'an archived id resubmitted is a duplicate');
  t.equal(again!.record.result?.text, promptOf('b0', 1000).toUpperCase(), 'answered with its result, read from the archive');
  t.equal(s.lookup('b3')?.result?.text, promptOf('b3', 1000).toUpperCase(), 'looked up by id from the archive');
  t.equal(await s.complete('b1', { text: 'late', worker: 'x', attempt: 1 }), 'duplicate', 'a late result for it is a duplicate');
  t.equal(s.queue.counts().queued, 0, 'nothing archived came back as work');
  await s.close();

  const out = swarm(['results', '--json', '--state-dir', dir]);
  t.equal(out.code, 0, out.stderr);
  const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string; result: { text: string } });
  t.same(lines.map((l) => l.id), ids.slice(0, 7), 'swarm results reads them');
  t.ok(lines.every((l) => l.result.text === promptOf(l.id, 1000).toUpperCase()), 'with their results');
});

t.test('a task larger than the bound leaves at once; failed tasks count their error', async (t) => {
  const dir = tempDir(t);
  const s = await TaskStore.open(dir, { ...q, defaultMaxAttempts: 1 }, j, { retain: { ageMs: HOUR, count: 1000, bytes: 10_000 }, evictEveryMs: HOUR });
  t.teardown(() => s.close());
  await runAll(s, [{ id: 'small', prompt: 'x' }]);
  await s.submitMany([{ id: 'bad', prompt: 'y' }]);
  s.lease(w);
  t.equal(await s.fail('bad', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'e'.repeat(100) }, false), 'failed');
  t.equal(s.retention.hot_bytes, (RECORD_BYTES + 2) + (RECORD_BYTES + 101), 'a failure counts its prompt and message');
  await runAll(s, [{ id: 'huge', prompt: 'z'.repeat(20_000) }]);
  t.equal(await s.evict(), 3, 'the huge one passes the bound alone: it and all before it leave');
  t.equal(s.retention.hot_bytes, 0);
  t.equal(s.lookup('huge')?.result?.text, 'Z'.repeat(20_000), 'still answered by id from the archive');
  account(t, s, dir, ['small', 'bad', 'huge']);
});

t.test('a restart rebuilds the byte total from the journal and the snapshot, and evicts what is over a smaller bound', async (t) => {
  const dir = tempDir(t);
  const big: RetainOptions = { ageMs: HOUR, count: 1000, bytes: 1e9 };
  const ids = Array.from({ length: 20 }, (_, i) => `r${i}`);
  const tasks = ids.map((id, i) => ({ id, prompt: promptOf(id, 200 + 100 * i) }));
  const s = await TaskStore.open(dir, q, j, { retain: big, evictEveryMs: HOUR });
  await runAll(s, tasks.slice(0, 12));
  await s.compact();
  // The rest only in the journal's tail: replayed from its lines.
  await runAll(s, tasks.slice(12));
  const total = s.retention.hot_bytes;
  t.equal(total, tasks.reduce((a, x) => a + RECORD_BYTES + 2 * x.prompt.length, 0), 'prompts, results and records');
  await s.close();

  const s2 = await TaskStore.open(dir, q, j, { retain: big, evictEveryMs: HOUR });
  t.equal(s2.retention.hot_bytes, total, 'replay (snapshot and tail, lines unparsed) rebuilds the same total');
  t.equal(s2.retention.hot_finished, 20);
  await s2.close();

  // A smaller bound: the first pass takes the oldest out until the rest fits.
  const bound = Math.floor(total / 3);
  const s3 = await TaskStore.open(dir, q, j, { retain: { ...big, bytes: bound }, evictEveryMs: HOUR, settleAfterOpenMs: HOUR });
  t.teardown(() => s3.close());
  const n = await s3.evict();
  t.ok(n > 0 && s3.retention.hot_bytes <= bound, `evicted ${n}, ${s3.retention.hot_bytes} bytes left of ${bound}`);
  const kept = ids.filter((id) => s3.queue.has(id));
  t.same(kept, ids.slice(20 - kept.length), 'the newest stay');
  const next = tasks[20 - kept.length - 1]!;
  t.ok(s3.retention.hot_bytes + RECORD_BYTES + 2 * next.prompt.length > bound, 'no more left than needed');
  const { archived: arch } = account(t, s3, dir, ids);
  t.same(arch, ids.slice(0, n), 'oldest first');
  t.equal(s3.lookup('r0')?.result?.text, tasks[0]!.prompt.toUpperCase(), 'the first evicted is answered from the archive');
  t.ok((await s3.submitMany([{ id: 'r1', prompt: 'again' }]))[0]!.duplicate, 'inside the window an archived id is a duplicate');
});

t.test('text with escapes and non-ASCII: replay counts it as the journal holds it, close to the live count', async (t) => {
  const dir = tempDir(t);
  const big: RetainOptions = { ageMs: HOUR, count: 1000, bytes: 1e9 };
  const s = await TaskStore.open(dir, q, j, { retain: big, evictEveryMs: HOUR });
  const prompt = 'say "hi"\nthen \\ leave\t' + 'ab'.repeat(200);
  await runAll(s, [{ id: 'e1', prompt }, { id: 'e2', prompt: 'prompt with "prompt":"inside" it' }], (p) => `${p} → ok`);
  const live = s.retention.hot_bytes;
  await s.close();
  const s2 = await TaskStore.open(dir, q, j, { retain: big, evictEveryMs: HOUR });
  t.teardown(() => s2.close());
  const replayed = s2.retention.hot_bytes;
  t.ok(replayed >= live && replayed <= live + 40, `replayed ${replayed} against live ${live}: escapes and UTF-8 bytes count as written`);
});

t.test('the archive pass behind: past the bytes bound and its margin new tasks are refused (SWARM_ERR_QUEUE_FULL), duplicates still answered; accepted again once a pass catches up', async (t) => {
  const dir = tempDir(t);
  // No pass runs on its own (an hour apart): finished tasks pile up as they did when the pass fell behind the load.
  const s = await TaskStore.open(dir, q, j, { retain: { ageMs: HOUR, count: 100_000, bytes: 100_000 }, evictEveryMs: HOUR });
  t.teardown(() => s.close());
  // 36 x (2 x 1,000,000 + 500) bytes hot: past the bound and its margin (hotCeiling: 32 MiB at least).
  const tasks = Array.from({ length: 36 }, (_, i) => ({ id: `b${i}`, prompt: promptOf(`b${i}`, 1_000_000) }));
  await s.submitMany(tasks);
  t.pass('accepted while under the ceiling (nothing finished yet)');
  for (let rec = s.lease(w); rec; rec = s.lease(w)) await s.complete(rec.id, { text: rec.spec.prompt, worker: 'w', attempt: rec.attempts });
  t.ok(s.retention.hot_bytes > hotCeiling(100_000), `${s.retention.hot_bytes} bytes hot, past the ceiling ${hotCeiling(100_000)}`);
  let refused: { code?: string; message?: string } | undefined;
  try { await s.submitMany([{ id: 'new-1', prompt: 'p' }]); } catch (e) { refused = e as typeof refused; }
  t.equal(refused?.code, 'SWARM_ERR_QUEUE_FULL', 'a new task is refused, retryable (429)');
  t.match(refused?.message ?? '', /the --retain bytes bound \(0\.1 MiB\) and a margin/, refused?.message ?? 'no message');
  t.notOk(s.queue.has('new-1'), 'and not taken');
  t.equal(s.retention.refused_behind, 1, 'counted in the status');
  const handedBack = await s.submitMany([{ id: 'handback-1', prompt: 'p' }], { whenBehind: 'accept' });
  t.equal(handedBack[0]!.duplicate, false, 'a task a worker hands back (it ran already) is taken all the same');
  const dup = await s.submitMany([{ id: 'b0', prompt: tasks[0]!.prompt }]);
  t.same(dup.map((d) => [d.duplicate, d.record.state]), [[true, 'done']], 'a known id is still answered (nothing new to hold)');
  t.same([s.retention.behind, s.retention.ceiling_bytes], [true, hotCeiling(100_000)], 'the status says it is behind, and where the ceiling is');
  // The results disk fails: the refusal names the archive's error instead of "catching up".
  const archive = (s as unknown as { archive: { append: (...a: unknown[]) => Promise<unknown> } }).archive;
  const append = archive.append;
  archive.append = async () => { throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }); };
  await s.evict().catch(() => undefined);
  let failing: { code?: string; message?: string } | undefined;
  try { await s.submitMany([{ id: 'new-2', prompt: 'p' }]); } catch (e) { failing = e as typeof failing; }
  t.equal(failing?.code, 'SWARM_ERR_QUEUE_FULL');
  t.match(failing?.message ?? '', /archive writes are failing \(ENOSPC: no space left on device, write\)/, failing?.message ?? 'no message');
  t.match(s.retention.last_error ?? '', /ENOSPC/, 'and the status has the error');
  archive.append = append;
  await s.evict();
  t.ok(s.retention.hot_bytes <= 100_000, `a pass brings it under the bound (${s.retention.hot_bytes} bytes)`);
  t.equal(s.retention.behind, false, 'no longer behind');
  const ok = await s.submitMany([{ id: 'new-1', prompt: 'p' }]);
  t.equal(ok[0]!.duplicate, false, 'then accepted');
});

t.test('Retention: the byte total, due and dueSince', async (t) => {
  const r = new Retention({ ageMs: HOUR, count: 100, bytes: 1000 });
  for (let i = 0; i < 5; i++) r.finished(`x${i}`, 1000 + i, 300);
  t.equal(r.bytes, 1500);
  t.same(r.due(1010, 100), ['x0', 'x1'], 'the oldest until the rest fits (900 <= 1000)');
  t.equal(r.dueSince(), 1003, 'past the bound since the task that took the total from the oldest over 1000 finished (x3)');
  t.same(r.due(1010, 1), ['x0'], 'at most max');
  r.drop(2);
  t.equal(r.bytes, 900);
  t.same(r.due(1010, 100), []);
  t.equal(r.dueSince(), 1002 + HOUR, 'under the bound: only the age');
  // Replay's order may differ: loaded and sorted with their bytes.
  const l = new Retention({ ageMs: HOUR, count: 100, bytes: 500 });
  l.load(['c', 'a', 'b'], [3, 1, 2], [100, 400, 200]);
  t.equal(l.bytes, 700);
  t.same(l.due(5, 10), ['a'], 'the oldest leaves first whatever the order read');
  // A restart after lives that missed their passes: over by bytes longer than the settle wait, at once.
  t.equal(firstPassDelay(l, 2 + 10_000, 5000), 0, 'overdue by bytes: no wait');
  t.equal(firstPassDelay(l, 2 + 1000, 5000), 5000, 'just over: the usual wait');
});

t.test('--retain bytes: units, and 0, negative or unparsable is a usage error', async (t) => {
  t.equal(parseBytes('256MB'), 256e6);
  t.equal(parseBytes('1.5GiB'), 1.5 * 2 ** 30);
  t.equal(parseBytes('512k'), 512 * 1024);
  t.equal(parseBytes('100000B'), 100_000);
  t.equal(parseBytes('64 MiB'), 64 * 2 ** 20);
  t.equal(formatBytes(96 * 2 ** 20), '96 MiB');
  t.equal(formatBytes(1.5 * 2 ** 30), '1.5 GiB');
  t.equal(formatBytes(900), '900 B');
  // The one printer (protocol/bytes.ts) for status, the planner and the renderer: two decimals from GiB up.
  t.equal(formatBytes(5_172_420_608), '4.82 GiB');
  t.equal(formatBytes(1020.4 * 1024), '1020.4 KiB');
  t.equal(formatBytes(160 * 2 ** 20), '160 MiB');
  t.equal(formatBytes(2 * 2 ** 40), '2 TiB');
  t.equal(formatBytes(-1.5 * 2 ** 20), '-1.5 MiB');
  t.ok(Number.isNaN(parseBytes('64')), 'a bare number is refused where a size takes a unit');
  t.same(parseRetain('24h,100000,256MB'), { ageMs: 86_400_000, count: 100_000, bytes: 256e6 });
  t.match(parseRetain(',,1GiB'), { count: 100_000, bytes: 2 ** 30 });
  t.match(parseRetain('1h'), { ageMs: HOUR, bytes: Number });
  for (const bad of ['1h,10,0MB', '1h,10,-1MB', ',,10', ',,lots', ',,5XB', '1h,1,2MB,3', ',,2TiB', ',,0.1B', ',,']) t.throws(() => parseRetain(bad), { code: 'SWARM_ERR_CONFIG' }, bad);
  const r = swarm(['up', '--retain', '24h,1000,0MB', '--state-dir', tempDir(t)]);
  t.equal(r.code, 2, 'swarm up --retain with 0 bytes exits with the usage code');
  t.match(r.stderr, /SWARM_ERR_CONFIG: .*--retain "24h,1000,0MB": bytes "0MB" is not a positive size/);
  const h = swarm(['hub', '--retain', ',,12', '--state-dir', tempDir(t)]);
  t.equal(h.code, 2, 'swarm hub --retain with a size without a unit exits 2');
  t.match(h.stderr, /SWARM_ERR_CONFIG: .*a positive size with a unit/);
});

t.test('swarm up --retain with bytes: status shows the hot bytes and the bound; a restart with a smaller bound evicts the oldest', async (t) => {
  const state = tempDir(t);
  t.teardown(() => { swarm(['down', '--state-dir', state]); });
  const up = (retain: string) => swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--json', '--retain', retain, '--state-dir', state]);
  let r = up('24h,1000,20KB');
  t.equal(r.code, 0, r.stderr);
  const ids = Array.from({ length: 30 }, (_, i) => `s${String(i).padStart(2, '0')}`);
  const file = path.join(state, 'tasks.jsonl');
  fs.writeFileSync(file, ids.map((id) => JSON.stringify({ id, prompt: promptOf(id, 1000) })).join('\n') + '\n');
  r = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', state]);
  t.equal(r.code, 0, r.stderr);
  type Ret = { retain: { bytes: number }; hot_finished: number; hot_bytes: number };
  const retention = () => (JSON.parse(swarm(['status', '--json', '--state-dir', state]).stdout) as { journal: { retention: Ret } }).journal.retention;
  const per = RECORD_BYTES + 1000 + 1006;
  t.ok(await until(() => retention().hot_bytes <= 20_000, 20_000), 'the pass brings the hot bytes under the bound');
  let ret = retention();
  t.equal(ret.retain.bytes, 20_000, 'status --json shows the bound');
  t.equal(ret.hot_bytes, ret.hot_finished * per, 'and the hot bytes');
  t.equal(ret.hot_finished, Math.floor(20_000 / per), 'as many as fit');
  const text = swarm(['status', '--state-dir', state]).stdout;
  t.match(text, new RegExp(`retain +${ret.hot_finished} of 1000 finished tasks hot, ${formatBytes(ret.hot_bytes).replace('.', '\\.')} of 19\\.5 KiB, each for at most 24h`), 'the text status says it in one line');

  const results = () => swarm(['results', '--json', '--state-dir', state]).stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: string; result: { text: string } });
  // Hot or archived inside the window, every id is answered by id with its result.
  const answered = async () => { const out: string[] = []; for (const id of ids) { const x = await api<{ state: string; text?: string }>(state, 'GET', `/tasks/${id}`); if (x.state === 'done' && x.text === `echo: ${promptOf(id, 1000)}`) out.push(id); } return out; };
  let arch = results();
  // One agent: the tasks finish in the order submitted.
  t.same(arch.map((a) => a.id), ids.slice(0, 30 - ret.hot_finished), 'the oldest are archived, in order');
  t.ok(arch.every((a) => a.result.text === `echo: ${promptOf(a.id, 1000)}`), 'with their results');
  const dup = await api<{ accepted: { id: string; duplicate: boolean; state: string }[] }>(state, 'POST', '/tasks', { tasks: [{ id: 's00', prompt: 'again' }] });
  t.match(dup.accepted, [{ id: 's00', duplicate: true, state: 'done' }], 'an archived id resubmitted inside the window is a duplicate');

  t.equal(swarm(['down', '--state-dir', state]).code, 0);
  r = up('24h,1000,8KB');
  t.equal(r.code, 0, r.stderr);
  t.ok(await until(() => retention().hot_bytes <= 8000, 30_000), 'after the restart the first pass evicts what is over the smaller bound');
  ret = retention();
  t.equal(ret.hot_finished, Math.floor(8000 / per), 'as many as fit the new bound');
  arch = results();
  t.same(arch.map((a) => a.id), ids.slice(0, 30 - ret.hot_finished), 'the oldest archived, in order, each once (duplicated 0)');
  t.same(await answered(), ids, 'every id answered by id with its result (lost 0)');
});
