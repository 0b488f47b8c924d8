import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import { ControlServer } from '../../hub/index.js';
import { SseParser, applyEvent, type SseEvent } from '../../cli/events.js';
import type { DashState } from '../../hub/dashboard/index.js';
import { quiet, startHub, startPool, waitWorkers } from '../helpers/inproc.js';
import { sleep, until } from '../helpers/wait.js';

const TOKEN = 'feed-test-token';
const bearer = { authorization: `Bearer ${TOKEN}` };

/** A reading dashboard client: every event, and the state they build. */
function reader(port: number) {
  const got: SseEvent[] = [];
  let state: DashState | undefined;
  const req = http.get({ host: '127.0.0.1', port, path: '/dashboard/events', headers: bearer }, (res) => {
    res.setEncoding('utf8');
    const p = new SseParser((e) => { got.push(e); state = applyEvent(state, e); });
    res.on('data', (c: string) => p.push(c));
  });
  req.on('error', () => { /* closed by the test */ });
  return { got, state: () => state, close: () => req.destroy() };
}

async function rig(t: Test, dashboard: Record<string, number>, workers = 3) {
  const h = await startHub({ token: TOKEN });
  const control = new ControlServer(h.hub, { host: '127.0.0.1', port: 0, token: TOKEN, dashboard }, quiet);
  const { port } = await control.start();
  const pool = startPool(h.addr, workers, { token: TOKEN, options: { token_ms: '2' } });
  t.teardown(async () => { await pool.stop(); await control.stop(); await h.stop(); });
  t.ok(await waitWorkers(h.hub, workers), `${workers} workers up`);
  return { h, control, port, dash: await control.dashboard() };
}

t.test('the feed follows the store\'s events: a task shows up and finishes on the stream with no periodic read at all', async (t) => {
  // A refresh every ten minutes: within this test only task events can make the feed read anything.
  const { h, port, dash } = await rig(t, { tickMs: 20, refreshMs: 600_000, sampleMs: 600_000 });
  const r = reader(port);
  t.teardown(r.close);
  t.ok(await until(() => r.state() !== undefined), 'snapshot');
  t.same(r.state()!.workers.map((w) => w.id), ['w-1', 'w-2', 'w-3']);
  const before = dash.feed.stats.reads;
  await sleep(500); // ~25 ticks with nothing happening
  const idleReads = dash.feed.stats.reads - before;
  t.ok(idleReads === 0, `no section read while nothing happened (${idleReads} reads over ~25 ticks)`);
  await h.hub.submit([{ prompt: 'one two three' }]);
  t.ok(await until(() => r.state()!.queue.done === 1, 10_000), 'the finished task reached the stream');
  t.ok(r.state()!.workers.some((w) => w.done === 1), 'and the worker that ran it');
  t.ok(dash.feed.stats.reads > before, 'read because of the events');
});

t.test('workers joining and leaving reach the stream at the next tick, not at the next full read', async (t) => {
  // A full read every ten minutes: only the registry's join and leave events can show these.
  const { h, port } = await rig(t, { tickMs: 20, refreshMs: 600_000, sampleMs: 600_000 });
  const r = reader(port);
  t.teardown(r.close);
  t.ok(await until(() => r.state() !== undefined), 'snapshot');
  const extra = startPool(h.addr, 1, { token: TOKEN, prefix: 'x' });
  t.ok(await until(() => r.state()!.workers.some((w) => w.id === 'x-1'), 5_000), 'a joining worker is shown');
  await extra.stop();
  t.ok(await until(() => r.state()!.workers.some((w) => w.id === 'x-1' && w.state === 'dead'), 5_000), 'a leaving one is shown dead');
});

t.test('a dashboard that never reads, with tasks flowing: the hub holds at most its buffer bound for it, drops it, and the reading one goes on', async (t) => {
  const LIMIT = 16 * 1024;
  const { h, port, dash } = await rig(t, { tickMs: 10, refreshMs: 10, maxBufferedBytes: LIMIT, stallMs: 2000 }, 25);
  const good = reader(port);
  t.teardown(good.close);
  const stuck = net.connect(port, '127.0.0.1');
  t.teardown(() => stuck.destroy());
  stuck.on('error', () => { /* the hub destroys it */ });
  stuck.write(`GET /dashboard/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
  stuck.pause(); // never reads: the kernel's buffers fill, then the hub's
  t.ok(await until(() => dash.feed.clientCount === 2), 'both connected');

  // Tasks flow until the stuck client is dropped (bounded: 60 s, 20,000 tasks).
  let peak = 0, submitted = 0;
  const deadline = Date.now() + 60_000;
  while (dash.feed.stats.dropped === 0 && Date.now() < deadline && submitted < 20_000) {
    await h.hub.submit(Array.from({ length: 20 }, (_, i) => ({ prompt: `task ${submitted + i} with some words` })));
    submitted += 20;
    for (let i = 0; i < 5; i++) { peak = Math.max(peak, ...dash.feed.buffered()); await sleep(10); }
  }
  t.equal(dash.feed.stats.dropped, 1, `the stuck client was dropped (after ${submitted} tasks)`);
  t.ok(peak > 0, `the hub did buffer for it (peak ${peak} B)`);
  t.ok(peak <= LIMIT + dash.feed.stats.maxMessage, `never more than the bound plus one message: ${peak} <= ${LIMIT} + ${dash.feed.stats.maxMessage}`);
  t.ok(dash.feed.stats.skipped > 0, `${dash.feed.stats.skipped} messages skipped, not queued`);
  t.equal(dash.feed.clientCount, 1, 'only the reading client is left');
  const done = h.hub.store.queue.counts().done;
  t.ok(await until(() => (good.state()?.queue?.done ?? 0) >= done, 10_000), 'the reading client kept up');
  // The hub destroyed the connection: reading again, the client sees it end.
  const closed = new Promise<boolean>((res) => { stuck.once('close', () => res(true)); setTimeout(() => res(false), 10_000).unref(); });
  stuck.resume();
  t.ok(await closed, 'the hub closed the stuck connection');
});

t.test('dashboards beyond the limit are refused with 503 and a retry hint; the open ones keep their streams', async (t) => {
  const { port, dash } = await rig(t, { tickMs: 20, maxClients: 2 });
  const a = reader(port), b = reader(port);
  t.teardown(() => { a.close(); b.close(); });
  t.ok(await until(() => dash.feed.clientCount === 2 && a.state() !== undefined && b.state() !== undefined), 'two open');
  const third = await new Promise<{ status?: number; retry?: string }>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/dashboard/events', headers: bearer }, (res) => { res.resume(); resolve({ status: res.statusCode, retry: res.headers['retry-after'] }); }).on('error', reject);
  });
  t.same(third, { status: 503, retry: '5' }, 'the third is refused');
  t.equal(dash.feed.clientCount, 2, 'still two');
  a.close();
  t.ok(await until(() => dash.feed.clientCount === 1), 'a closed dashboard frees its place');
});
