import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import { api, hubFile, swarm, tempDir, until } from '../helpers/cli.js';

const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

interface Status { tasks: { done: number }; waits: number }

t.test('40 clients /wait for 6,000 finished 4 KB tasks and never read: hub memory stays bounded, the hub keeps answering', async (t) => {
  const state = tempDir(t);
  const up = swarm(['up', '--agents', '4', '--detach', '--state-dir', state, '--driver', 'echo', '--no-failover']);
  t.equal(up.code, 0, up.stderr);
  const N = 6000;
  const pad = 'y'.repeat(4096);
  const ids = Array.from({ length: N }, (_, i) => `b-${i}`);
  for (let i = 0; i < N; i += 1000) await api(state, 'POST', '/tasks', { tasks: ids.slice(i, i + 1000).map((id) => ({ id, prompt: pad })) });
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).tasks.done >= N, 180_000, 200), 'all 6,000 done');
  const h = hubFile(state)!;
  const before = rssMb(h.pid);
  const body = JSON.stringify({ ids });
  const socks: net.Socket[] = [];
  t.teardown(() => { for (const s of socks) s.destroy(); });
  for (let i = 0; i < 40; i++) {
    const s = net.connect(h.control.port, h.control.host);
    s.pause(); // never reads
    s.on('error', () => {});
    s.write(`POST /wait HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${h.token ? `authorization: Bearer ${h.token}\r\n` : ''}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    socks.push(s);
  }
  // Each answer is ~25 MB: long enough for the hub to have tried to send all of it, were it unbounded.
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).waits === 40, 30_000, 100), 'all 40 waits are held (streaming, blocked on their readers)');
  let peak = before;
  for (let i = 0; i < 20; i++) { peak = Math.max(peak, rssMb(h.pid)); await new Promise((r) => setTimeout(r, 100)); }
  t.ok(peak - before < 300, `hub RSS ${before.toFixed(0)} -> ${peak.toFixed(0)} MB (without bounds: +2.5 GB)`);
  const s = await api<Status>(state, 'GET', '/status');
  t.equal(s.tasks.done, N, 'the hub answers status meanwhile');
  for (const x of socks) x.destroy();
  t.ok(await until(async () => (await api<Status>(state, 'GET', '/status')).waits === 0, 30_000, 100), 'closed clients release their waits');
});
