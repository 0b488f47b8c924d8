// `swarm submit --file` given what is not a file of tasks, as a careless user does: a missing path, a
// directory, a file with no line break (a model file by mistake, /dev/zero). Before, the first two
// were SWARM_ERR_INTERNAL ("a bug"), and a file with no line break was read whole into memory as
// one line (/dev/zero: 2.2 GB after 20 s, until the process died).
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { api, swarm, tempDir } from '../helpers/cli.js';

t.test('submit --file: a missing path and a directory are usage errors naming it; a line past 64 MiB is refused as it is read, nothing of its upload sent', async (t) => {
  const root = tempDir(t);
  const dir = path.join(root, 'state');
  t.equal(swarm(['up', '--agents', '1', '--driver', 'echo', '--detach', '--state-dir', dir], { timeoutMs: 60_000 }).code, 0, 'a swarm runs');
  for (const [file, says] of [[path.join(root, 'nope.jsonl'), /no such file/], [root, /a directory, not a file of tasks/]] as const) {
    const r = swarm(['submit', '--file', file, '--state-dir', dir], { timeoutMs: 30_000 });
    t.equal(r.code, 2, `--file ${file}: exit 2 (${r.stderr.trim()})`);
    t.match(r.stderr, new RegExp(`SWARM_ERR_CONFIG: --file ${file}: ${says.source}`), 'names the file and what is wrong');
    t.notMatch(r.stderr, /INTERNAL|a bug/, 'not as a bug');
  }
  // One task, then 70 MiB with no line break.
  const big = path.join(root, 'big.bin');
  fs.writeFileSync(big, JSON.stringify({ id: 'before-big', prompt: 'fine' }) + '\n');
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  for (let i = 0; i < 70; i++) fs.appendFileSync(big, chunk);
  const r = swarm(['submit', '--file', big, '--state-dir', dir], { timeoutMs: 60_000 });
  t.equal(r.code, 1, `exit 1 (${r.stderr.slice(0, 300)})`);
  t.match(r.stderr, new RegExp(`SWARM_ERR_TOO_LARGE: ${big}:2: a line longer than 64 MiB \\(no line break\\)`), 'names the line and the bound');
  const task = await api<{ code?: string }>(dir, 'GET', '/tasks/before-big');
  t.equal(task.code, 'SWARM_ERR_UNKNOWN_TASK', 'the upload the long line fell in was not sent');
  const ok = swarm(['submit', 'still fine', '--wait', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(ok.code, 0, 'the swarm takes tasks');
});
