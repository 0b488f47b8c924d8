import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { CLI, tempDir } from '../helpers/cli.js';
import { startControlled, startPool, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

interface Line { id?: string; state?: string; text?: string; complete?: boolean; final?: number; accepted?: number; duplicates?: string[]; code?: string }

/** POST a body to the control API; the status and the answer's lines (or its one JSON body as a line). */
function post(port: number, route: string, body: unknown): Promise<{ status: number; type: string; lines: Line[] }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: route, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => (text += s));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), lines: text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Line) }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** `swarm …` in the background (a fake hub in this process must keep answering meanwhile). */
function swarmAsync(args: string[], onStderr?: (text: string) => void): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); onStderr?.(stderr); });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

t.test('POST /tasks with wait: accepted first, then every task once as it finishes, then the end line', async (t) => {
  const { hub, addr, control, port } = await startControlled(t);
  const pool = startPool(addr, 2, { options: { latency_ms: '50' } });
  t.teardown(() => pool.stop());
  t.ok(await waitWorkers(hub, 2), 'two agents joined');
  const ids = Array.from({ length: 8 }, (_, i) => `sw-${i}`);
  const r = await post(port, '/tasks', { tasks: ids.map((id) => ({ id, prompt: id })), wait: { timeout_ms: 30_000 } });
  t.equal(r.status, 200);
  t.match(r.type, /ndjson/);
  t.same(r.lines[0], { accepted: 8, duplicates: [] }, 'the first line says what was accepted');
  const tasks = r.lines.filter((l) => l.id !== undefined);
  t.same(tasks.map((l) => l.id).sort(), [...ids].sort(), 'every task exactly once');
  t.ok(tasks.every((l) => l.state === 'done' && l.text === `echo: ${l.id}`), 'each line is its own finished task');
  t.same(r.lines.at(-1), { complete: true, final: 8 }, 'the last line ends the answer');
  t.equal(control.waits.count, 0, 'no wait held');

  // The same ids again (a retried upload): duplicates, named, and their results at once.
  const again = await post(port, '/tasks', { tasks: [{ id: 'sw-0', prompt: 'changed' }, { id: 'sw-new', prompt: 'sw-new' }], wait: { timeout_ms: 30_000 } });
  t.same(again.lines[0], { accepted: 2, duplicates: ['sw-0'], conflicts: [{ id: 'sw-0', fields: ['prompt'] }] }, 'the duplicate sent with another prompt is named with the field');
  t.equal(again.lines.find((l) => l.id === 'sw-0')?.text, 'echo: sw-0', 'a duplicate answers with the first task\'s result, unchanged');
  t.equal(again.lines.find((l) => l.id === 'sw-new')?.text, 'echo: sw-new');
  t.same(again.lines.at(-1), { complete: true, final: 2 });
  t.equal(hub.store.queue.counts().done, 9, 'nine tasks in all, none twice');
});

t.test('POST /tasks with wait is refused whole, nothing journaled, when no wait place is free or wait is malformed', async (t) => {
  const { hub, control, port } = await startControlled(t);
  const held = Array.from({ length: 1024 }, () => control.waits.hold({}));
  const full = await post(port, '/tasks', { tasks: [{ id: 'too-many', prompt: 'x' }], wait: {} });
  t.equal(full.lines[0]?.code, 'SWARM_ERR_TOO_MANY_WAITS');
  t.notOk(hub.store.queue.has('too-many'), 'the task was not accepted');
  for (const h of held) h.release();
  t.equal(control.waits.count, 0, 'every place given back');
  const bad = await post(port, '/tasks', { tasks: [{ id: 'bad-wait', prompt: 'x' }], wait: 5 });
  t.equal(bad.status, 400);
  t.equal(bad.lines[0]?.code, 'SWARM_ERR_BAD_PAYLOAD');
  t.notOk(hub.store.queue.has('bad-wait'), 'the task was not accepted');
  const open = await post(port, '/tasks', { tasks: [{ id: 'waits', prompt: 'no worker' }], wait: { timeout_ms: 20 } });
  t.same(open.lines, [{ accepted: 1, duplicates: [] }, { id: 'waits', state: 'queued', attempts: 0 }, { complete: false, final: 0 }], 'at the timeout, the open task as it stands');
  t.equal(control.waits.count, 0);
});

/**
 * A control API that answers as an older hub (POST /tasks alone, then a streamed /wait) or cuts its
 * combined answer after "accepted": the CLI must get every result either way, and after "accepted"
 * ask for the results alone instead of uploading again.
 */
function fakeHub(mode: 'old' | 'cut'): Promise<{ port: number; routes: string[]; close(): void }> {
  const routes: string[] = [];
  const tasks = new Map<string, string>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const b = JSON.parse(body) as { tasks?: { id: string; prompt: string }[]; wait?: unknown; ids?: string[] };
      routes.push(`${req.url}${b.wait ? '+wait' : ''}`);
      if (req.url === '/tasks') {
        for (const x of b.tasks!) tasks.set(x.id, x.prompt);
        if (mode === 'old' || !b.wait) { res.writeHead(202, { 'content-type': 'application/json' }); res.end(JSON.stringify({ accepted: b.tasks!.map((x) => ({ id: x.id, duplicate: false, state: 'queued' })) })); return; }
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.write(`${JSON.stringify({ accepted: b.tasks!.length, duplicates: [] })}\n`);
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      for (const id of [...b.ids!].reverse()) res.write(`${JSON.stringify({ id, state: 'done', text: `echo: ${tasks.get(id)}`, attempts: 1 })}\n`);
      res.end(`${JSON.stringify({ complete: true, final: b.ids!.length })}\n`);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ port: (server.address() as { port: number }).port, routes, close: () => server.close() })));
}

for (const mode of ['old', 'cut'] as const) {
  t.test(`swarm submit --wait against a hub that ${mode === 'old' ? 'predates the combined request' : 'cuts the answer after accepting'}: every result, in order`, async (t) => {
    const fake = await fakeHub(mode);
    t.teardown(() => fake.close());
    const dir = tempDir(t);
    const file = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(file, ['a', 'b', 'c'].map((p) => JSON.stringify({ id: `t-${p}`, prompt: p })).join('\n'));
    const r = await swarmAsync(['submit', '--file', file, '--wait', '--json', '--retry-for', '20000', '--hub-url', `http://127.0.0.1:${fake.port}`]);
    t.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { complete: boolean; failed: number; tasks: { id: string; text: string }[] };
    t.same(out.tasks.map((x) => [x.id, x.text]), [['t-a', 'echo: a'], ['t-b', 'echo: b'], ['t-c', 'echo: c']], 'in the file\'s order, each its own');
    t.equal(out.complete, true);
    t.same(fake.routes, ['/tasks+wait', '/wait'], 'after "accepted", only the results were asked for again');
  });
}

t.test('swarm submit --retry-for 0 tries once: no "retrying" line, exit 3 when no hub answers', async (t) => {
  // A port that was just free: nothing listens on it.
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  const r = await swarmAsync(['submit', 'hi', '--wait', '--retry-for', '0', '--hub-url', `http://127.0.0.1:${port}`]);
  t.equal(r.code, 3, 'exit 3: no swarm');
  t.match(r.stderr, /SWARM_ERR_NO_SWARM/);
  t.notMatch(r.stderr, /retrying/, 'no retry announced');
});

t.test('swarm submit retries an upload refused for a full queue until the queue has room: every task once', async (t) => {
  const { hub, addr, port } = await startControlled(t, { maxQueue: 50 });
  // 30 of 50 places taken by tasks no worker runs yet: 40 more do not fit.
  await hub.submit(Array.from({ length: 30 }, (_, i) => ({ id: `held-${i}`, prompt: `held ${i}` })));
  const dir = tempDir(t);
  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, Array.from({ length: 40 }, (_, i) => JSON.stringify({ prompt: `late ${i}` })).join('\n'));
  let said = '';
  const run = swarmAsync(['submit', '--file', file, '--wait', '--json', '--retry-for', '40000', '--hub-url', `http://127.0.0.1:${port}`], (e) => (said = e));
  const stderrOf = () => said;
  const total = () => [...hub.store.queue.all()].length;
  t.ok(await until(() => /retrying/.test(stderrOf()), 20_000), 'the upload was refused and is retried');
  t.equal(total(), 30, 'nothing of the upload was accepted while the queue was full');
  const pool = startPool(addr, 2);
  t.teardown(() => pool.stop());
  const r = await run;
  t.equal(r.code, 0, r.stderr.slice(-600));
  t.match(r.stderr, /SWARM_ERR_QUEUE_FULL|queue holds/, 'it said why it retried');
  const out = JSON.parse(r.stdout) as { complete: boolean; tasks: { id: string; state: string; text: string }[] };
  t.equal(out.complete, true);
  t.same(out.tasks.map((x) => x.text), Array.from({ length: 40 }, (_, i) => `echo: late ${i}`), 'every task, in the file\'s order');
  const ids = new Set(out.tasks.map((x) => x.id));
  t.equal(ids.size, 40, 'each its own id');
  t.equal(total(), 70, 'the hub holds 70 tasks: none lost, none twice');
  t.equal(hub.store.queue.counts().done, 70);
});
