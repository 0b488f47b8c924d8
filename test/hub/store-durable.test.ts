import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { TaskStore } from '../../hub/index.js';
import { startControlled, startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';

const opts = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const w = { id: 'w', caps: [] as string[] };

function tmp(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-store-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const onDisk = (dir: string, needle: string): boolean => fs.readFileSync(path.join(dir, 'journal.ndjson'), 'utf8').includes(needle);

t.test('a task is queued, and a result shown, only once its journal record is on disk', async (t) => {
  const dir = tmp(t);
  const s = await TaskStore.open(dir, opts, { fsyncMs: 0 });
  t.teardown(() => s.close());
  const seen: string[] = [];
  s.subscribe((e) => {
    const needle = e.type === 'accepted' ? '"t":"task"' : e.type === 'done' ? '"t":"result"' : undefined;
    if (needle) seen.push(`${e.type}:${onDisk(dir, needle)}`);
  });
  const submitting = s.submitMany([{ id: 'a', prompt: 'A' }]);
  t.notOk(s.queue.has('a'), 'not queued while its record is being written');
  await submitting;
  t.equal(s.queue.get('a')!.state, 'queued');
  t.equal(s.lease(w)!.id, 'a');
  const completing = s.complete('a', { text: 'done-a', worker: 'w', attempt: 1 });
  t.equal(s.queue.get('a')!.state, 'leased', 'no result readable before it is durable');
  t.equal(await s.complete('a', { text: 'second', worker: 'x', attempt: 1 }), 'duplicate', 'a second result while the first is written is a duplicate');
  t.equal(await completing, 'recorded');
  t.equal(s.queue.get('a')!.result!.text, 'done-a');
  t.same(seen, ['accepted:true', 'done:true'], 'events come after the record is in the file');
});

t.test('a crash between complete and its journal write: the result was never shown and the task runs again', async (t) => {
  const dir = tmp(t);
  const s1 = await TaskStore.open(dir, opts, { fsyncMs: 0 });
  await s1.submitMany([{ id: 'a', prompt: 'A' }]);
  s1.lease(w);
  let shown = false;
  s1.subscribe((e) => { if (e.type === 'done') shown = true; });
  // The "crash": complete is called, and the process state is read back before its write lands.
  void s1.complete('a', { text: 'lost', worker: 'w', attempt: 1 }).catch(() => {});
  const copy = tmp(t);
  fs.copyFileSync(path.join(dir, 'journal.ndjson'), path.join(copy, 'journal.ndjson'));
  t.notOk(shown, 'not announced');
  t.equal(s1.queue.get('a')!.state, 'leased', 'not visible');
  await s1.close();
  const s2 = await TaskStore.open(copy, opts, { fsyncMs: 0 });
  t.teardown(() => s2.close());
  t.equal(s2.queue.get('a')!.state, 'queued', 'after the crash the task is queued again, never done without a result');
});

t.test('the event stream: typed events in order, unsubscribe stops them', async (t) => {
  const s = await TaskStore.open(undefined, opts, { fsyncMs: 0 });
  const types: string[] = [];
  const off = s.subscribe((e) => types.push(e.type === 'evicted' ? `evicted:${e.ids.join(',')}` : `${e.type}:${e.rec.id}`));
  await s.submitMany([{ id: 'a', prompt: 'A', max_attempts: 2 }]);
  s.lease(w);
  await s.fail('a', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' }, true);
  t.equal(s.queue.get('a')!.state, 'queued');
  await new Promise((r) => setTimeout(r, 200)); // the retry's backoff
  s.lease(w);
  await s.fail('a', 'w', { code: 'SWARM_ERR_TASK_FAILED', msg: 'y' }, true);
  t.same(types, ['accepted:a', 'leased:a', 'requeued:a', 'leased:a', 'failed:a']);
  t.equal(s.queue.get('a')!.error!.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
  off();
  t.equal(s.events.size, 0, 'no listener left');
  await s.submitMany([{ id: 'b', prompt: 'B' }]);
  t.equal(types.length, 5, 'nothing after unsubscribe');
});

/** POST /wait over a keep-alive agent. */
function post(agent: http.Agent, port: number, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/wait', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

t.test('10,000 /wait calls leave no listener behind', async (t) => {
  const { hub, control, port } = await startControlled(t);
  await hub.submit([{ id: 'never', prompt: 'no worker runs this' }]);
  const base = hub.store.events.size;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  t.teardown(() => agent.destroy());
  let ok = 0;
  const N = 10_000;
  for (let i = 0; i < N; i += 200) {
    const batch = Array.from({ length: 200 }, () => post(agent, port, { ids: ['never'], timeout_ms: 1 }));
    for (const r of await Promise.all(batch)) if (r.status === 200 && JSON.parse(r.body).complete === false) ok++;
  }
  t.equal(ok, N, 'every wait timed out with complete:false');
  t.equal(hub.store.events.size, base, 'no listener left behind');
  t.equal(control.waits.count, 0, 'no wait held');
});

t.test('dispatch latency is a small positive number', async (t) => {
  const { hub, addr, stop } = await startHub();
  const pool = startPool(addr, 2);
  t.teardown(async () => { await pool.stop(); await stop(); });
  t.ok(await waitWorkers(hub, 2));
  await hub.submit(Array.from({ length: 20 }, (_, i) => ({ prompt: `p${i}` })));
  t.ok(await waitTasks(hub, 20));
  const h = hub.metrics.dispatchLatency;
  const p50 = h.quantile(0.5);
  const p99 = h.quantile(0.99);
  t.ok(h.quantile(0) >= 0 && p99 > 0, `min ${h.quantile(0)} ms, p50 ${p50} ms, p99 ${p99} ms: none negative`);
  t.ok(p99 < 60_000, `p99 ${p99} ms is small (the clocks are not mixed)`);
});
