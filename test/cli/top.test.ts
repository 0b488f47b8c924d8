import t from 'tap';
import { spawn } from 'node:child_process';
import { api, CLI, swarm, tempDir, until } from '../helpers/cli.js';

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `swarm top` under a real pty: util-linux `script` gives it a terminal of 120x40 and passes
 * what we write to its stdin in as keystrokes (no native addon to build for the test).
 */
function underPty(args: string[]) {
  const cmd = `stty cols 120 rows 40; exec ${[process.execPath, CLI, ...args].map(quote).join(' ')}`;
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], { env: { ...process.env, TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  let code: number | null = null;
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => { code = c; r(c); }));
  return { term: { write: (s: string) => child.stdin.write(s), kill: (sig: NodeJS.Signals) => child.kill(sig) }, output: () => out, exited, running: () => code === null };
}

t.test('swarm top: draws in place under a pty, updates as tasks finish, quits on q; plain lines without a terminal', async (t) => {
  const dir = tempDir(t);
  // `up --dashboard` prints a one-time link once ready (no display here: nothing to open it with).
  const up = swarm(['up', '--agents', '3', '--driver', 'echo', '-d', '--dashboard', '--state-dir', dir, '--json'], { env: { DISPLAY: '', WAYLAND_DISPLAY: '' } });
  t.equal(up.code, 0, up.stderr);
  const link = up.stdout.trim().split('\n').map((l) => JSON.parse(l) as { url?: string; opened?: boolean }).find((j) => j.url);
  t.match(link?.url, /^http:\/\/127\.0\.0\.1:\d+\/dashboard\?ticket=[\w-]{20,}$/, '`up --dashboard` prints the link');
  t.equal(link?.opened, false);
  const redeemed = await fetch(link!.url!, { redirect: 'manual' });
  t.equal(redeemed.status, 303, 'and it lets a browser in');
  t.match(redeemed.headers.get('set-cookie') ?? '', /HttpOnly/);

  const top = underPty(['top', '--state-dir', dir]);
  t.teardown(() => { if (top.running()) top.term.kill('SIGKILL'); });
  t.ok(await until(() => /swarm top · hub-/.test(top.output()) && /w-3/.test(top.output()), 30_000), 'it draws the hub and the workers');
  t.match(top.output(), /\x1b\[\?1049h/, 'on the alternate screen');
  t.match(top.output(), /\x1b\[H/, 'redrawn in place (cursor home), not scrolled');
  await api(dir, 'POST', '/tasks', { tasks: Array.from({ length: 5 }, (_, i) => ({ prompt: `t${i}` })) });
  t.ok(await until(() => /0 queued · 0 running · 5 done/.test(top.output()), 30_000), 'it updates as the tasks finish');
  top.term.write('q');
  const code = await Promise.race([top.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 15_000))]);
  t.equal(code, 0, 'q quits');
  t.match(top.output(), /\x1b\[\?1049l/, 'and gives the screen back');

  const plain = spawn(process.execPath, [CLI, 'top', '--state-dir', dir], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  plain.stdout.on('data', (c: Buffer) => (out += c.toString()));
  t.ok(await until(() => /mode star workers 3 \(0 busy, 0 dead\) queue 0 queued 0 running 5 done/.test(out), 30_000), 'not a terminal: plain lines');
  t.notMatch(out, /\x1b\[/, 'without escape codes');
  plain.stdin.write('q\n');
  t.equal(await new Promise((r) => plain.once('exit', r)), 0, 'q quits there too');
});
