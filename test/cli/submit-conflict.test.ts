// A task id is an idempotency key: a task sent again under a known id is not run. A careless user who
// reuses an id for another prompt (two files numbered job-1…, a prompt edited and re-run) got the
// earlier prompt's answer printed as this one's, exit 0, and nothing said.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, swarm, tempDir, until } from '../helpers/cli.js';

interface Acc { accepted: { id: string; duplicate: boolean; conflict?: string[] }[] }

t.test('an id reused with other fields: the hub names the fields, the CLI warns and says it was not run; a resend of the same task does not', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  // --retain ,1: one finished task stays hot, so an earlier one is compared from the archive too.
  t.equal(swarm(['up', '--agents', '2', '--driver', 'echo', '--detach', '--retain', ',1', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, 'a swarm runs');
  const file = path.join(root, 'tasks.jsonl');
  fs.writeFileSync(file, [
    { id: 'job-1', prompt: 'first file, line 1' },
    { id: 'job-2', prompt: 'same', max_tokens: 5 },
    { id: 'job-1', prompt: 'second file, line 1' },
    { max_tokens: 5, prompt: 'same', id: 'job-2' },
  ].map((x) => JSON.stringify(x)).join('\n') + '\n');

  const w = swarm(['submit', '--file', file, '--wait', '--json', '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(w.code, 0, `submitted and waited (${w.stderr.trim()})`);
  const out = JSON.parse(w.stdout) as { conflicts?: { id: string; fields: string[] }[]; tasks: { id: string; text: string }[] };
  t.same(out.conflicts, [{ id: 'job-1', fields: ['prompt'] }], 'the JSON names the task sent under a known id with another prompt, and only it (key order is not a difference)');
  t.match(w.stderr, /warning: 1 task\(s\) reuse the id of a task already submitted with other fields: job-1 \(prompt\)\. .*they were not run, and the results shown for them are the earlier tasks'/, 'stderr says so');
  t.same(out.tasks.map((x) => x.text), ['echo: first file, line 1', 'echo: same', 'echo: first file, line 1', 'echo: same'], 'what ran: the first task of each id, once');

  // The same file again (a retry, a re-run): every task is a duplicate of itself, no warning.
  const again = swarm(['submit', '--file', file, '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(again.code, 0);
  t.equal(again.stdout.split('\n').filter((l) => l.includes('not run')).length, 1, `only the reused line is said not run: ${again.stdout}`);
  t.match(again.stdout, /job-1 \(duplicate: already submitted with another prompt; not run\)/);
  const single = swarm(['submit', 'first file, line 1', '--id', 'job-1', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(single.code, 0);
  t.notMatch(single.stderr, /warning/, 'a resend of the first task itself: no warning');

  // Once job-1 is archived (one finished task stays hot), a reuse is still compared, from its archived line.
  for (let i = 0; i < 3; i++) t.equal(swarm(['submit', `push ${i}`, '--id', `push-${i}`, '--wait', '--state-dir', dir], { timeoutMs: 30_000 }).code, 0);
  t.ok(await until(() => swarm(['results', '--id', 'job-1', '--json', '--state-dir', dir]).stdout.includes('"job-1"'), 20_000, 200), 'job-1 is archived');
  const late = await api<Acc>(dir, 'POST', '/tasks', { tasks: [{ id: 'job-1', prompt: 'third edit' }, { id: 'job-1', prompt: 'first file, line 1' }] });
  t.same(late.accepted.map((a) => [a.duplicate, a.conflict]), [[true, ['prompt']], [true, undefined]], 'from the archive: the other prompt is named, the same one is not');
  const all = swarm(['results', '--json', '--state-dir', dir]).stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: string });
  t.equal(all.filter((r) => r.id === 'job-1').length, 1, 'job-1 ran once');
});
