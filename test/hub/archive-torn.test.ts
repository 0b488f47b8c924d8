import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { swarm, tempDir, until, api } from '../helpers/cli.js';

/**
 * The hub dies in the middle of a results archive write: the archive's last line is torn. The next
 * start cuts it (the next line must start clean) and used to say nothing. Now the cut is logged with
 * the file and offset and shown by `swarm status`, and the task whose line was torn is not lost: its
 * evict record never reached the journal, so it is still hot, and is archived again whole.
 */

const archivedIds = (dir: string): string[] => archiveFiles(archiveDir(dir)).flatMap(([, f]) =>
  fs.readFileSync(f, 'utf8').split('\n').flatMap((l) => { const m = /"id":"([^"]+)"/.exec(l); return m && l.endsWith('}') ? [m[1]!] : []; }));

t.test('a torn archive tail is cut with a warning, shown in status, and its task is still there', async (t) => {
  const base = tempDir(t);
  const dir = path.join(base, 'state');
  const up = (retain: string) => swarm(['up', '-d', '--driver', 'echo', '--agents', '1', '--no-failover', '--retain', retain, '--state-dir', dir]);
  let r = up('1h,5');
  t.equal(r.code, 0, r.stderr);
  const file = path.join(base, 'tasks.jsonl');
  fs.writeFileSync(file, Array.from({ length: 20 }, (_, i) => JSON.stringify({ id: `a${i}`, prompt: `prompt ${i}` })).join('\n') + '\n');
  r = swarm(['submit', '--file', file, '--wait', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  // Fifteen over the horizon of five leave for the archive (a pass a second).
  t.ok(await until(() => archivedIds(dir).length === 15, 30_000), 'fifteen archived');
  const hot = ['a15', 'a16', 'a17', 'a18', 'a19'].filter((id) => !archivedIds(dir).includes(id));
  t.equal(hot.length, 5, 'five still hot');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);

  // The crash: half of a hot task's archive line was written, no evict record followed.
  const [, last] = archiveFiles(archiveDir(dir)).at(-1)!;
  const whole = fs.readFileSync(last, 'utf8').split('\n').filter(Boolean).at(-1)!;
  const torn = whole.replace(/"id":"a\d+"/, `"id":"${hot[0]}"`).slice(0, Math.floor(whole.length / 2));
  const offset = fs.statSync(last).size;
  fs.appendFileSync(last, torn);

  // A horizon of twenty keeps everything hot after the restart: the torn task must be found hot.
  r = up('1h,20');
  t.equal(r.code, 0, r.stderr);
  const st = JSON.parse(swarm(['status', '--json', '--state-dir', dir]).stdout) as { journal: { retention: { archive: { torn_tail?: { file: string; offset: number; bytes: number } } } } };
  t.same(st.journal.retention.archive.torn_tail, { file: last, offset, bytes: Buffer.byteLength(torn) }, 'status --json names the cut: file, offset, bytes');
  t.match(swarm(['status', '--state-dir', dir]).stdout, /torn last line was cut/, 'and the status text says so');
  const log = fs.readFileSync(path.join(dir, 'logs', 'hub.log'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { level: number; msg: string; file?: string; offset?: number });
  const warn = log.find((l) => l.level === 40 && /torn last line/.test(l.msg));
  t.ok(warn && warn.file === last && warn.offset === offset, 'the hub logged a warning with the file and offset');
  t.equal(fs.statSync(last).size, offset, 'the torn bytes were cut');
  const task = await api<{ state: string; text?: string }>(dir, 'GET', `/tasks/${hot[0]}`);
  t.equal(task.state, 'done', 'the torn line\'s task is still there, done');
  t.match(task.text ?? '', new RegExp(`prompt ${hot[0]!.slice(1)}`), 'with its result');

  // Evicted again under the old horizon: the archive holds every task once, whole, and reads clean.
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
  r = up('1h,5');
  t.equal(r.code, 0, r.stderr);
  t.ok(await until(() => archivedIds(dir).length >= 15, 30_000));
  const ids = archivedIds(dir);
  t.equal(new Set(ids).size, ids.length, 'no task archived twice');
  t.equal(ids.length, 15);
  r = swarm(['results', '--json', '--state-dir', dir]);
  t.equal(r.code, 0, r.stderr);
  t.notMatch(r.stderr, /damaged/, 'no damaged line left behind');
  t.equal(r.stdout.split('\n').filter(Boolean).length, 15);
  // The other five are still hot and done: 15 archived + 5 hot, so none of the 20 was lost.
  const states = await Promise.all(hot.map((id) => api<{ state: string }>(dir, 'GET', `/tasks/${id}`)));
  t.same(states.map((s) => s.state), hot.map(() => 'done'), 'the five hot tasks are done');
  t.equal(new Set([...ids, ...hot]).size, 20, 'all twenty tasks accounted for, none lost');
  t.equal(swarm(['down', '--state-dir', dir]).code, 0);
});
