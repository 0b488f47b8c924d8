import t from 'tap';
import http from 'node:http';
import { ControlServer } from '../../hub/index.js';
import { SseParser, applyEvent, type SseEvent } from '../../cli/events.js';
import type { DashState } from '../../hub/dashboard/index.js';
import { quiet, startHub, startPool, waitWorkers } from '../helpers/inproc.js';

interface Reply { status: number; headers: http.IncomingHttpHeaders; body: string }

function request(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Read an event stream until `until` says stop; returns the events. */
function readEvents(port: number, path: string, headers: Record<string, string>, until: (e: SseEvent[]) => boolean): Promise<SseEvent[]> {
  return new Promise((resolve, reject) => {
    const got: SseEvent[] = [];
    const req = http.get({ host: '127.0.0.1', port, path, headers }, (res) => {
      res.setEncoding('utf8');
      const p = new SseParser((e) => { got.push(e); if (until(got)) { req.destroy(); resolve(got); } });
      res.on('data', (c: string) => p.push(c));
      res.on('end', () => resolve(got));
    });
    req.on('error', (e) => (got.length ? resolve(got) : reject(e)));
  });
}

t.test('the SSE parser keeps partial lines across chunks and joins data lines', async (t) => {
  const got: SseEvent[] = [];
  const p = new SseParser((e) => got.push(e));
  const text = 'retry: 1000\n\nevent: patch\nid: 3\ndata: {"a":\n\n: comment\ndata: x\ndata: y\n\n';
  for (const ch of text) p.push(ch);
  t.same(got, [{ event: 'patch', id: '3', data: '{"a":' }, { event: 'message', id: undefined, data: 'x\ny' }]);
  const s = applyEvent(undefined, { event: 'snapshot', data: JSON.stringify({ hub: {}, workers: [], queue: {}, history: [[1, 0, 0, 0, 0, 0]], runs: [] }) });
  const s2 = applyEvent(s, { event: 'patch', data: JSON.stringify({ runs: [{ run: 'r' }], samples: [[2, 1, 0, 0, 0, 0]] }) }) as DashState;
  t.equal(s2.history.length, 2);
  t.equal(s2.runs[0]!.run, 'r');
});

t.test('dashboard: a one-time ticket becomes an HttpOnly SameSite=Strict session; the page and its stream need it', async (t) => {
  const h = await startHub({ token: 'sekrit-token' });
  const control = new ControlServer(h.hub, { host: '127.0.0.1', port: 0, token: 'sekrit-token', dashboard: { tickMs: 50 } }, quiet);
  const { port } = await control.start();
  const pool = startPool(h.addr, 3, { token: 'sekrit-token' });
  t.teardown(async () => { await pool.stop(); await control.stop(); await h.stop(); });
  t.ok(await waitWorkers(h.hub, 3));
  const bearer = { authorization: 'Bearer sekrit-token' };

  t.equal((await request(port, 'POST', '/dashboard/ticket')).status, 401, 'no ticket without the token');
  t.equal((await request(port, 'GET', '/dashboard')).status, 401, 'no page without a session');
  t.equal((await request(port, 'GET', '/dashboard/events')).status, 401, 'no stream without a session');
  const tk = JSON.parse((await request(port, 'POST', '/dashboard/ticket', bearer)).body) as { path: string; ticket: string };
  t.match(tk.path, /^\/dashboard\?ticket=[\w-]{20,}$/);

  const redeemed = await request(port, 'GET', tk.path);
  t.equal(redeemed.status, 303);
  t.equal(redeemed.headers.location, '/dashboard', 'the ticket leaves the address bar');
  const setCookie = String(redeemed.headers['set-cookie']);
  t.match(setCookie, /HttpOnly/);
  t.match(setCookie, /SameSite=Strict/);
  t.equal((await request(port, 'GET', tk.path)).status, 401, 'a ticket works once');
  const cookie = setCookie.split(';')[0]!;

  const page = await request(port, 'GET', '/dashboard', { cookie });
  t.equal(page.status, 200);
  t.match(page.body, /<script src="\/dashboard\/app.js"/);
  t.match(String(page.headers['content-security-policy']), /script-src 'self'/);
  t.notMatch(page.body, /sekrit-token/, 'the token is not in the page');
  const js = await request(port, 'GET', '/dashboard/app.js', { cookie });
  t.equal(js.status, 200);
  t.doesNotThrow(() => new Function(js.body), 'the script parses');

  const events = await readEvents(port, '/dashboard/events', { cookie }, (e) => e.some((x) => x.event === 'snapshot'));
  const snap = JSON.parse(events.find((e) => e.event === 'snapshot')!.data) as DashState;
  t.same(snap.workers.map((w) => w.id), ['w-1', 'w-2', 'w-3']);
  t.equal(snap.hub.mode, 'star');

  // The page's controls use the control API with the cookie: only from the page itself.
  const task = JSON.stringify({ prompt: 'hi' });
  t.equal((await request(port, 'POST', '/tasks', { cookie }, task)).status, 401, 'a cookie without the page header changes nothing');
  t.equal((await request(port, 'POST', '/tasks', { cookie, 'x-swarm-dashboard': '1', origin: 'http://evil.example' }, task)).status, 401, 'another origin is refused');
  t.equal((await request(port, 'GET', '/status', { cookie, host: 'rebound.example:80' })).status, 401, 'a rebound host name is refused');
  const ok = await request(port, 'POST', '/tasks', { cookie, 'x-swarm-dashboard': '1', origin: `http://127.0.0.1:${port}` }, task);
  t.equal(ok.status, 202);
  const id = (JSON.parse(ok.body) as { accepted: { id: string }[] }).accepted[0]!.id;

  // A node view: the task's prompt, then its result.
  const tv = await readEvents(port, `/dashboard/task?id=${id}`, { cookie }, (e) => e.some((x) => x.event === 'done'));
  t.equal(JSON.parse(tv.find((e) => e.event === 'task')!.data).prompt, 'hi');
  t.same(JSON.parse(tv.find((e) => e.event === 'done')!.data).text, 'echo: hi');
  t.equal((await request(port, 'GET', '/dashboard/task?id=nope', { cookie })).status, 404);
});
