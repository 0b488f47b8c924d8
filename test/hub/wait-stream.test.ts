import t from 'tap';
import http from 'node:http';
import { callLines } from '../../cli/http.js';
import { startControlled, startPool, waitWorkers } from '../helpers/inproc.js';

interface Line { id?: string; state?: string; text?: string; complete?: boolean; final?: number }

/** A streamed POST /wait; each line with the time it arrived (ms after the request). */
function streamed(port: number, body: unknown): Promise<{ status: number; type: string; lines: { at: number; v: Line }[] }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/wait', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      const lines: { at: number; v: Line }[] = [];
      let rest = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => {
        rest += s;
        for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n')) {
          lines.push({ at: performance.now() - t0, v: JSON.parse(rest.slice(0, nl)) as Line });
          rest = rest.slice(nl + 1);
        }
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), lines }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

t.test('a streamed /wait sends each result as its task finishes, every task once, then the end line', async (t) => {
  const { hub, addr, control, port } = await startControlled(t);
  // Two agents, 150 ms a task, six tasks: three waves, the last ~450 ms after the first.
  const pool = startPool(addr, 2, { options: { latency_ms: '150' } });
  t.teardown(() => pool.stop());
  t.ok(await waitWorkers(hub, 2), 'two agents joined');
  const ids = Array.from({ length: 6 }, (_, i) => `s-${i}`);
  await hub.submit(ids.map((id) => ({ id, prompt: id })));
  const r = await streamed(port, { ids, timeout_ms: 30_000, stream: true });
  t.equal(r.status, 200);
  t.match(r.type, /ndjson/);
  const tasks = r.lines.filter((l) => l.v.id !== undefined);
  t.same(tasks.map((l) => l.v.id).sort(), [...ids].sort(), 'every task exactly once');
  t.ok(tasks.every((l) => l.v.state === 'done' && l.v.text === `echo: ${l.v.id}`), 'each line is the finished task');
  const end = r.lines.at(-1)!;
  t.same(end.v, { complete: true, final: 6 }, 'the last line ends the answer');
  t.ok(end.at - tasks[0]!.at > 200, `the first result came ${(end.at - tasks[0]!.at).toFixed(0)} ms before the end, not with it`);
  t.equal(control.waits.count, 0, 'no wait held');
});

t.test('a streamed /wait that times out lists the open tasks as they stand; 1,000 of them leave no listener', async (t) => {
  const { hub, control, port } = await startControlled(t);
  await hub.submit([{ id: 'never', prompt: 'no worker runs this' }]);
  const base = hub.store.events.size;
  const one = await streamed(port, { ids: ['never'], timeout_ms: 50, stream: true });
  t.same(one.lines.map((l) => l.v), [{ id: 'never', state: 'queued', attempts: 0 }, { complete: false, final: 0 }]);
  let ok = 0;
  for (let i = 0; i < 1000; i += 100) {
    const rs = await Promise.all(Array.from({ length: 100 }, () => streamed(port, { ids: ['never'], timeout_ms: 1, stream: true })));
    ok += rs.filter((r) => r.lines.at(-1)?.v.complete === false).length;
  }
  t.equal(ok, 1000, 'every wait ended with complete:false');
  t.equal(hub.store.events.size, base, 'no listener left behind');
  t.equal(control.waits.count, 0, 'no wait held');
});

t.test('a client that leaves a streamed /wait releases it; callLines gives the lines, or the whole answer of a one-piece /wait', async (t) => {
  const { hub, control, port } = await startControlled(t);
  await hub.submit([{ id: 'open', prompt: 'no worker runs this' }]);
  const base = hub.store.events.size;
  const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/wait', headers: { 'content-type': 'application/json' } });
  req.on('error', () => {});
  req.end(JSON.stringify({ ids: ['open'], timeout_ms: 60_000, stream: true }));
  const deadline = Date.now() + 5000;
  while (control.waits.count === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  t.equal(control.waits.count, 1, 'the wait is held');
  req.destroy();
  while (control.waits.count > 0 && Date.now() < deadline + 5000) await new Promise((r) => setTimeout(r, 10));
  t.equal(control.waits.count, 0, 'released when the client left');
  t.equal(hub.store.events.size, base, 'its listener is gone');

  const target = { control: { host: '127.0.0.1', port } };
  const lines: unknown[] = [];
  const streamedAnswer = await callLines(target, 'POST', '/wait', { ids: ['open'], timeout_ms: 1, stream: true }, (v) => lines.push(v));
  t.equal(streamedAnswer, undefined, 'a streamed answer resolves with nothing: its lines went to onLine');
  t.same(lines, [{ id: 'open', state: 'queued', attempts: 0 }, { complete: false, final: 0 }]);
  const whole = await callLines<{ complete: boolean }>(target, 'POST', '/wait', { ids: ['open'], timeout_ms: 1 }, () => t.fail('no lines from a one-piece answer'));
  t.equal(whole?.complete, false, 'a one-piece answer comes back whole');
});

t.test('callLines refuses a streamed answer with a bad line, and one cut short', async (t) => {
  const answers = ['{"id":"a","state":"done"}\nnot json\n', '{"id":"a","state":"done"}\n{"id":"b"'];
  const server = http.createServer((_req, res) => {
    const body = answers.shift()!;
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.write(body);
    if (body.endsWith('\n')) res.end(); else setTimeout(() => res.socket?.destroy(), 50);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const target = { control: { host: '127.0.0.1', port: (server.address() as { port: number }).port } };
  const seen: unknown[] = [];
  const bad = await callLines(target, 'POST', '/wait', {}, (v) => seen.push(v)).then(() => undefined, (e: unknown) => e as { code?: string });
  t.equal(bad?.code, 'SWARM_ERR_BAD_JSON', 'a line that is not JSON rejects');
  t.same(seen, [{ id: 'a', state: 'done' }], 'the good line before it was delivered');
  const cut = await callLines(target, 'POST', '/wait', {}, () => {}).then(() => 'resolved', (e: unknown) => e as Error);
  t.not(cut, 'resolved', 'an answer cut mid-line rejects');
});
