import fs from 'node:fs';
import t from 'tap';
import { runCommand, startCommand } from '../../drivers/run-command.js';

/** Running (a zombie waiting for its reaper counts as ended); a signal's delivery is asynchronous, so look for a while. */
async function alive(pid: number): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    let state: string;
    try { state = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] ?? ''; } catch { return false; }
    if (state === 'Z' || state === 'X') return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

t.test('a command gets its input, and its output and exit code come back', async (t) => {
  const r = await runCommand('/bin/sh', ['-c', 'tr a-z A-Z; echo err >&2; exit 3'], { input: 'hello' });
  t.match(r, { exitCode: 3, signal: null, stdout: 'HELLO', stderr: 'err\n', timedOut: false, overflow: false });
});

t.test('a timeout stops a command that ignores SIGTERM, and the children in its group', async (t) => {
  // The background sleep writes its pid first: it must be dead once the result is in.
  const r = await runCommand('/bin/sh', ['-c', 'trap "" TERM; sleep 60 & echo $!; while :; do sleep 0.05; done'], { timeoutMs: 300, killGraceMs: 200 });
  t.equal(r.timedOut, true);
  t.equal(r.signal, 'SIGKILL', 'SIGTERM was ignored, SIGKILL ended it');
  const child = Number(r.stdout.trim());
  t.ok(child > 0);
  t.notOk(await alive(child), 'the background child went with the group');
});

t.test('output past maxBuffer stops the command and says so', async (t) => {
  const r = await runCommand('/bin/sh', ['-c', 'yes x'], { maxBuffer: 4096, killGraceMs: 100 });
  t.equal(r.overflow, true);
  t.equal(r.stdout.length, 4096);
  t.not(r.exitCode, 0);
});

t.test('a program that does not exist is an error in the result, not a throw', async (t) => {
  const r = await runCommand('/nonexistent/program', []);
  t.equal(r.error?.code, 'ENOENT');
});

t.test('an abort stops a streamed command; what it printed before came through', async (t) => {
  const ac = new AbortController();
  const c = startCommand('/bin/sh', ['-c', 'echo first; sleep 60'], { stream: true, signal: ac.signal, killGraceMs: 100 });
  let seen = '';
  for await (const chunk of c.stdout!) { seen += String(chunk); if (seen.includes('first')) ac.abort(); }
  const r = await c.result;
  t.equal(seen, 'first\n');
  t.equal(r.aborted, true);
  t.equal(r.signal, 'SIGTERM');
});

t.test('what a finished command left in the background is killed, so its end is not held open', async (t) => {
  const r = await runCommand('/bin/sh', ['-c', 'sleep 60 & echo $!']);
  t.equal(r.exitCode, 0);
  t.notOk(await alive(Number(r.stdout.trim())));
});
