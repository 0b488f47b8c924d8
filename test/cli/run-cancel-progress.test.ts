import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { api, swarm, swarmBg, tempDir, until } from '../helpers/cli.js';

interface Status { tasks: { queued: number; leased: number } }
interface Progress { done: number; failed: number; running: number; cancelled?: number }

t.test('a cancelled run counts its unfinished nodes as cancelled, not running: progress line, runs ls/show --json, report', async (t) => {
  const dir = tempDir(t);
  const state = path.join(dir, 'state');
  // Tasks that take 10 minutes: the run is under way until the cancel.
  const up = swarm(['up', '--detach', '--agents', '2', '--driver', 'echo', '--driver-opt', 'latency_ms=600000', '--state-dir', state, '--json'], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);
  const file = path.join(dir, 'slow.json');
  fs.writeFileSync(file, JSON.stringify({ name: 'cancel-progress', topology: 'star', inputs: { items: ['a', 'b', 'c', 'd'] }, roles: { agent: { prompt: 'say {{item}}' } } }));

  // Not --json: the progress line goes to stderr, a line per change (no TTY).
  const follow = swarmBg(['run', file, '--state-dir', state]);
  const exited = new Promise<number | null>((r) => follow.child.once('exit', (code) => r(code)));
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).tasks.leased === 2, 60_000, 100), 'two nodes running, two queued');
  const { runs } = await api<{ runs: { run: string }[] }>(state, 'GET', '/runs');
  const run = runs[0]!.run;

  const c = swarm(['runs', 'cancel', run, '--reason', 'test: stop', '--state-dir', state, '--json']);
  t.equal(c.code, 0, c.stderr);
  const v = JSON.parse(c.stdout) as { tasks_cancelled: number; progress: Progress; dir: string };
  t.equal(v.tasks_cancelled, 4);
  t.match(v.progress, { running: 0, cancelled: 4, done: 0, failed: 0 }, 'the cancel answer: nothing running, four cancelled');

  const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 60_000).unref())]);
  if (code === 'timeout') follow.child.kill('SIGKILL');
  t.equal(code, 130, `swarm run ends as interrupted: ${follow.output().slice(-500)}`);
  const lines = follow.output().split('\n').filter((l) => l.startsWith(`run ${run} star: nodes`));
  t.match(lines.at(-1), /nodes 0 done, 0 running, 0 failed, 4 cancelled/, `the last progress line: ${lines.at(-1)}`);

  const live = await api<{ progress: Progress }>(state, 'GET', `/runs/${run}`);
  t.match(live.progress, { running: 0, cancelled: 4 }, 'GET /runs/:id');
  const ls = JSON.parse(swarm(['runs', 'ls', '--state-dir', state, '--json']).stdout) as { runs: { run: string; verdict: string; metrics: { cancelled: number; done: number } }[] };
  t.match(ls.runs.find((r) => r.run === run), { verdict: 'cancelled', metrics: { cancelled: 4, done: 0 } }, 'runs ls --json');
  const show = JSON.parse(swarm(['runs', 'show', run, '--state-dir', state, '--json']).stdout) as { result: { progress: Progress; metrics: { cancelled: number } } };
  t.match(show.result.progress, { running: 0, cancelled: 4 }, 'runs show --json: result progress');
  t.equal(show.result.metrics.cancelled, 4, 'runs show --json: result metrics');

  const md = fs.readFileSync(path.join(v.dir, 'report.md'), 'utf8');
  const rows = md.split('\n').filter((l) => /^\| agent/.test(l) || /^\| [^|]+ \| agent \|/.test(l));
  t.equal(rows.filter((l) => /\| cancelled \(SWARM_ERR_CANCELLED\) \|/.test(l)).length, 4, `report: four nodes cancelled with SWARM_ERR_CANCELLED:\n${md}`);
  t.notMatch(md, /\| running/, 'report: no node running');
  t.notMatch(fs.readFileSync(path.join(v.dir, 'report.html'), 'utf8'), /<tr class="running">/, 'report.html: no node running');
});
