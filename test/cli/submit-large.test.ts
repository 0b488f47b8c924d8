import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, hubFile, swarm, tempDir } from '../helpers/cli.js';
import { Checker, type FinalTask } from '../helpers/checker.js';
import { taskSlices } from '../../cli/task-file.js';

/**
 * Uploads past the control API's 64 MiB body: `swarm submit --file` of tasks that are each well
 * within bounds but come to more than that together was cut off mid-body (ECONNRESET), retried for
 * two minutes and reported as "cannot reach the hub"; a client sending one such body got a reset
 * instead of an answer with a code.
 */

t.test('uploads are split by bytes as well as by count', async (t) => {
  const file = path.join(tempDir(t), 'tasks.jsonl');
  const sizes = async (maxBytes: number, max: number): Promise<number[]> => {
    const out: number[] = [];
    for await (const s of taskSlices(file, () => {}, maxBytes, max)) out.push(s.tasks.length);
    return out;
  };
  fs.writeFileSync(file, Array.from({ length: 10 }, (_, i) => JSON.stringify({ id: `b${i}`, prompt: 'x'.repeat(100) })).join('\n') + '\n');
  t.same(await sizes(400, 5000), [3, 3, 3, 1]);
  t.same(await sizes(1 << 20, 4), [4, 4, 2]);
  fs.writeFileSync(file, JSON.stringify({ prompt: 'y'.repeat(1000) }) + '\n');
  t.same(await sizes(10, 5000), [1], 'a task past the byte bound goes alone');
});

t.test('swarm submit --file of 72 MB of tasks: every task done once, unchanged; one 70 MB body gets 413 SWARM_ERR_LINE_TOO_LONG', async (t) => {
  const base = tempDir(t);
  const state = path.join(base, 'state');
  const up = swarm(['up', '--state-dir', state, '--driver', 'echo', '--agents', '2', '-d']);
  t.equal(up.code, 0, up.stderr);
  const pad = 'z'.repeat(900_000);
  const file = path.join(base, 'big.jsonl');
  fs.writeFileSync(file, Array.from({ length: 80 }, (_, i) => JSON.stringify({ id: `L${i}`, prompt: `${i} ${pad}` })).join('\n') + '\n');
  const check = new Checker();
  // 72 MB of answers on stdout: past spawnSync's default buffer.
  const r = spawnSync(process.execPath, [CLI, 'submit', '--file', file, '--wait', '--json', '--retry-for', '5000', '--state-dir', state], { encoding: 'utf8', timeout: 120_000, maxBuffer: 256 * 1024 * 1024 });
  t.equal(r.status, 0, `exit 0 ${r.stderr.split('\n').slice(-3).join(' ')}`);
  const out = r.status === 0 ? JSON.parse(r.stdout) as { tasks: FinalTask[] } : { tasks: [] };
  check.acceptedIds(Array.from({ length: 80 }, (_, i) => `L${i}`));
  for (const x of out.tasks) if (x.state === 'done') check.sawDone(x.id, x.text!);
  const v = check.check(out.tasks, { expect: (id) => `echo: ${id.slice(1)} ${pad}`, mustFinish: true });
  t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed }, { lost: 0, duplicated: 0, changed: 0 }, v.details.join('; '));

  const h = hubFile(state)!;
  const body = JSON.stringify({ prompt: 'q'.repeat(70 * 1024 * 1024) });
  const res = await fetch(`http://${h.control.host}:${h.control.port}/tasks`, { method: 'POST', body, headers: { authorization: `Bearer ${h.token}` } })
    .then(async (x) => ({ status: x.status, body: await x.json() as { code: string } }), (e: Error & { cause?: { code?: string } }) => ({ status: 0, body: { code: e.cause?.code ?? e.message } }));
  t.equal(res.status, 413, 'answered, not reset');
  t.equal(res.body.code, 'SWARM_ERR_LINE_TOO_LONG');
});
