import t from 'tap';
import http from 'node:http';
import { ControlServer } from '../../hub/index.js';
import { SseParser, applyEvent } from '../../cli/events.js';
import type { DashState } from '../../hub/dashboard/index.js';
import { quiet, startHub, startPool, waitWorkers } from '../helpers/inproc.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'live-test-token';

t.test('tokens/s, the queue\'s and the worker\'s, move while an answer streams, before it is done', async (t) => {
  const h = await startHub({ token: TOKEN });
  const control = new ControlServer(h.hub, { host: '127.0.0.1', port: 0, token: TOKEN, dashboard: { tickMs: 50, refreshMs: 200, sampleMs: 200 } }, quiet);
  const { port } = await control.start();
  // One word every 20 ms: a 400-word answer streams for about 8 s.
  const pool = startPool(h.addr, 1, { token: TOKEN, options: { token_ms: '20' } });
  t.teardown(async () => { await pool.stop(); await control.stop(); await h.stop(); });
  t.ok(await waitWorkers(h.hub, 1), 'worker up');

  let state: DashState | undefined;
  const req = http.get({ host: '127.0.0.1', port, path: '/dashboard/events', headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
    res.setEncoding('utf8');
    const p = new SseParser((e) => { state = applyEvent(state, e); });
    res.on('data', (c: string) => p.push(c));
  });
  req.on('error', () => { /* closed by the test */ });
  t.teardown(() => req.destroy());

  // Workers send partial answers only while a dashboard is open: connected before the task is sent.
  t.ok(await until(() => state !== undefined), 'the dashboard is connected');
  await h.hub.submit([{ id: 'long', prompt: Array.from({ length: 400 }, (_, i) => `w${i}`).join(' '), max_tokens: 1000 }]);
  const live = await until(() => (state?.queue.tps ?? 0) > 0 && (state?.workers[0]?.tps ?? 0) > 0, 6_000);
  const rec = h.hub.store.queue.get('long');
  t.ok(live, `tokens/s above 0 while streaming (queue ${state?.queue.tps}, worker ${state?.workers[0]?.tps})`);
  t.equal(rec?.state, 'leased', 'and the task was still running then');
});
