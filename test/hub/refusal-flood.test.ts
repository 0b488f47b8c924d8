// Anyone who can reach the worker port causes refusals, without a token. Each was a log line, so one
// local process looping on a wrong token grew hub.log by 600 KB/s without bound, on the journal's disk.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { hubFile, swarm, tempDir, until } from '../helpers/cli.js';
import { killGroup, startHub, startWorkers } from '../helpers/failover.js';

const logOf = (dir: string) => fs.readdirSync(dir).filter((f) => f.startsWith('hub-') && f.endsWith('.log')).map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n');
const lines = (dir: string, msg: string) => logOf(dir).split('\n').filter((l) => l.includes(msg)).map((l) => JSON.parse(l) as { msg: string; more?: number; worker?: string; remote?: string });

/** `n` links in turn, `conc` at a time: each sends `frame` and is done when the hub answers or closes it (each bounded by 5 s). */
async function refusedLinks(port: number, n: number, conc: number, frame: string): Promise<number> {
  let started = 0, answered = 0;
  const one = (): Promise<void> => new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => s.write(frame));
    const end = () => { s.destroy(); resolve(); };
    s.once('data', () => { answered++; end(); });
    s.once('error', end);
    s.once('close', end);
    s.setTimeout(5000, end);
  });
  const lane = async () => { while (started < n) { started++; await one(); } };
  await Promise.all(Array.from({ length: conc }, lane));
  return answered;
}

t.test('2,000 handshakes with a wrong token: a bounded number of log lines and one count of the rest; the hub still admits and runs', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  const hub = await startHub(dir, ['--token', 'the-right-token-0123456789']);
  t.teardown(() => killGroup(hub));
  const h = hubFile(dir)!;
  const frame = JSON.stringify({ ver: 1, id: 'x-1', type: 'HANDSHAKE', payload: { driver: 'echo', worker_id: 'intruder', token: 'a-wrong-token' } }) + '\n';
  const answered = await refusedLinks(h.port, 2000, 20, frame);
  t.equal(answered, 2000, 'every link was answered (refused)');
  const msg = 'handshake refused: bad token';
  const one = lines(dir, msg).filter((l) => l.more === undefined);
  t.ok(one.length >= 1 && one.length <= 30, `refusals logged one by one: ${one.length} of 2,000 (at most 10 per 10 s)`);
  t.ok(one.every((l) => l.worker === 'intruder' && /^127\.0\.0\.1:\d+$/.test(l.remote ?? '')), 'each logged one names the worker and its address');
  // The rest are counted in one line per window, written when the window closes.
  t.ok(await until(() => lines(dir, msg).reduce((n, l) => n + 1 + (l.more ?? 0), 0) - lines(dir, msg).filter((l) => l.more !== undefined).length === 2000, 15_000, 100),
    `every refusal is logged or counted: ${JSON.stringify(lines(dir, msg).filter((l) => l.more !== undefined))}`);
  const counted = lines(dir, msg).filter((l) => l.more !== undefined);
  t.ok(counted.length >= 1 && counted.every((l) => /and \d+ more in 10 s, not logged one by one/.test(l.msg)), 'the count says what it is');

  // The hub still admits a worker with the token and runs its tasks.
  const workers = startWorkers(dir, 1);
  t.teardown(() => killGroup(workers));
  const sub = swarm(['submit', 'after the flood', '--id', 'after-1', '--wait', '--json', '--state-dir', dir], { timeoutMs: 30_000 });
  t.equal(sub.code, 0, `submitted and ran: ${sub.stderr}`);
  t.match(sub.stdout, /echo: after the flood/, 'its answer');
});
