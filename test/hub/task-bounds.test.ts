import t from 'tap';
import http from 'node:http';
import { ControlServer } from '../../hub/index.js';
import { quiet, startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';

async function control(over: Parameters<typeof startHub>[0] = {}) {
  const h = await startHub(over);
  const c = new ControlServer(h.hub, { host: '127.0.0.1', port: 0 }, quiet);
  const addr = await c.start();
  const post = async (body: unknown) => {
    const res = await fetch(`http://127.0.0.1:${addr.port}/tasks`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    return { status: res.status, body: await res.json() as { code?: string; msg?: string; accepted?: unknown[] } };
  };
  return { ...h, post, controlPort: addr.port, stop: async () => { await c.stop(); await h.stop(); } };
}

function deepSchema(levels: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < levels; i++) s = { type: 'object', properties: { a: s } };
  return s;
}

t.test('POST /tasks refuses what cannot be sent to a worker with 400 SWARM_ERR_TOO_LARGE naming the limit, and accepts nothing of the batch', async (t) => {
  const { hub, post, stop } = await control();
  t.teardown(stop);
  const big = await post({ tasks: [{ id: 'ok-1', prompt: 'fine' }, { id: 'huge', prompt: 'x'.repeat(2 * 1024 * 1024) }] });
  t.equal(big.status, 400);
  t.equal(big.body.code, 'SWARM_ERR_TOO_LARGE');
  t.match(big.body.msg, /task huge .*prompt.*1048576-byte/, 'names the task, the field and the line limit');
  t.notOk(hub.store.queue.get('ok-1'), 'nothing of the batch was accepted');
  // Escapes count: a prompt of newlines doubles as JSON.
  const escaped = await post({ id: 'nl', prompt: '\n'.repeat(600 * 1024) });
  t.equal(escaped.body.code, 'SWARM_ERR_TOO_LARGE', 'measured as it goes on the wire (JSON escapes)');
  const meta = await post({ id: 'm', prompt: 'p', meta: { note: 'y'.repeat(1024 * 1024) } });
  t.equal(meta.body.code, 'SWARM_ERR_TOO_LARGE', 'every field counts (meta travels to replicas)');
  // Written as text: JSON.stringify itself overflows the stack on 50,000 levels.
  const levels = 50_000;
  const deep = await post(`{"id":"deep","prompt":"p","json_schema":${'{"type":"object","properties":{"a":'.repeat(levels)}{"type":"string"}${'}}'.repeat(levels)}}`);
  t.equal(deep.status, 400, 'a 50,000-level schema is a 400, not a stack overflow');
  t.equal(deep.body.code, 'SWARM_ERR_TOO_LARGE');
  t.match(deep.body.msg, /deeper than 32 levels/);
  const wide = await post({ id: 'wide', prompt: 'p', json_schema: { enum: Array.from({ length: 30_000 }, (_, i) => i) } });
  t.equal(wide.body.code, 'SWARM_ERR_TOO_LARGE', 'and bounded in size');
  const fits = await post({ id: 'fits', prompt: 'x'.repeat(1024 * 1024 - 4096), json_schema: deepSchema(10) });
  t.equal(fits.status, 202, 'a task that fits is accepted');
  // Near the bound, with nothing but strings and numbers: past the quick bound, measured exactly.
  const flat = await post({ id: 'flat', prompt: 'x'.repeat(1024 * 1024 - 4096), priority: 1 });
  t.equal(flat.status, 202, 'a flat task just under the bound is accepted');
  const flatOver = await post({ id: 'flat-over', prompt: '\u0001'.repeat(200 * 1024) });
  t.equal(flatOver.body.code, 'SWARM_ERR_TOO_LARGE', 'a flat task whose escapes pass the bound is refused');
});

t.test('a worker that cannot take a TASK_REQ names the task: that attempt fails at once, not after its lease', async (t) => {
  // The hub takes 4 MiB lines; the workers keep the default 1 MiB.
  const { hub, addr, stop } = await control({ maxLine: 4 * 1024 * 1024, maxAttempts: 2 });
  const pool = startPool(addr, 1);
  t.teardown(async () => { await pool.stop(); await stop(); });
  t.ok(await waitWorkers(hub, 1));
  await hub.submit([{ id: 'big', prompt: 'x'.repeat(2 * 1024 * 1024) }, { id: 'small', prompt: 'hi' }]);
  t.ok(await waitTasks(hub, 2, 30_000), 'both final well inside the 10 min lease');
  const rec = hub.store.queue.get('big')!;
  t.equal(rec.state, 'failed');
  t.equal(rec.attempts, 2, 'each attempt failed, none hung');
  t.match(rec.error?.msg ?? '', /LINE_TOO_LONG|longer than 1048576/, `error: ${JSON.stringify(rec.error)}`);
  t.equal(hub.store.queue.get('small')!.result?.text, 'echo: hi', 'the worker went on with other work');
});

t.test('a task nested 200,000 deep anywhere, and a malformed URL, are 400s naming the fault, not SWARM_ERR_INTERNAL', async (t) => {
  const { hub, controlPort, post, stop } = await control();
  t.teardown(stop);
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
  for (const [what, body] of [['a bare body', deep(200_000)], ['a field', `{"id":"d1","prompt":"x","meta":${deep(200_000)}}`],
    ['a task in a list', `{"tasks":[{"id":"d2","prompt":"x","meta":{"a":${deep(200_000)}}}]}`]]) {
    const r = await post(body!);
    t.equal(r.status, 400, `${what}: 400 (was 500, the stack overflowed)`);
    t.equal(r.body.code, 'SWARM_ERR_TOO_LARGE', `${what}: says it is too deep (${r.body.msg})`);
  }
  t.notOk(hub.store.queue.get('d1') ?? hub.store.queue.get('d2'), 'nothing accepted');
  const nested = await post({ id: 'fine', prompt: 'p', json_schema: deepSchema(15) });
  t.equal(nested.status, 202, `ordinary nesting is accepted (${JSON.stringify(nested.body)})`);
  const url = await fetch(`http://127.0.0.1:${controlPort}/tasks/%E0%A4%A`);
  t.equal(url.status, 400, 'a malformed percent-encoding is a 400');
  t.equal(((await url.json()) as { code: string }).code, 'SWARM_ERR_BAD_PAYLOAD');
});

t.test('tasks with ids a URL takes for path steps (".", "..") are found by GET /tasks/<id>, as sent or percent-encoded', async (t) => {
  const { controlPort, post, stop } = await control();
  t.teardown(stop);
  const ids = ['.', '..', '...', '%2E%2E'];
  const r = await post({ tasks: ids.map((id) => ({ id, prompt: `p ${id}` })) });
  t.equal(r.status, 202, 'accepted');
  // Raw paths (fetch would resolve "/tasks/.." to "/" before sending, as URL parsing did in the hub).
  const get = (p: string) => new Promise<{ status: number; body: { id?: string; code?: string } }>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: controlPort, path: p }, (res) => {
      let s = '';
      res.on('data', (c: Buffer) => (s += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(s) as { id?: string; code?: string } }));
    }).on('error', reject);
  });
  for (const [p, id] of [['/tasks/.', '.'], ['/tasks/..', '..'], ['/tasks/...', '...'], ['/tasks/%2E%2E', '..'], ['/tasks/%252E%252E', '%2E%2E'], ['/tasks/..?x=1', '..']] as const) {
    const g = await get(p);
    t.same([g.status, g.body.id], [200, id], `GET ${p}: task ${id} (${JSON.stringify(g.body)})`);
  }
  const none = await get('/tasks/nope');
  t.same([none.status, none.body.code], [404, 'SWARM_ERR_UNKNOWN_TASK'], 'an unknown id is still a 404');
});
