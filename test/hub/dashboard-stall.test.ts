import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import { SseClient, frame } from '../../hub/dashboard/sse.js';

/**
 * The event stream is bounded: a browser that stops reading never makes the hub buffer more than
 * the limit (plus the one message that crossed it), skips messages while behind, gets one fresh
 * snapshot when it reads again, and is dropped when it stays behind past the stall time.
 * A real HTTP server and a raw loopback socket that pauses; the stall clock is driven.
 */

const LIMIT = 64 * 1024;
const MSG = frame('patch', { pad: 'x'.repeat(4096) });

interface Rig { client: SseClient; sock: net.Socket; received: () => string; clock: { now: number }; closedWhy: () => string | undefined }

async function rig(t: Test, stallMs: number): Promise<Rig> {
  const clock = { now: 0 };
  let closedWhy: string | undefined;
  let client!: SseClient;
  const ready = new Promise<void>((resolve) => {
    const server = http.createServer((_req, res) => {
      client = new SseClient(res, { maxBufferedBytes: LIMIT, stallMs }, () => frame('resync', { snapshot: true }), (_c, why) => { closedWhy = why; }, () => clock.now);
      resolve();
    });
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      sock.connect(port, '127.0.0.1', () => sock.write('GET /dashboard/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
    });
    t.teardown(() => { sock.destroy(); server.closeAllConnections(); server.close(); });
  });
  const sock = new net.Socket();
  let text = '';
  sock.on('data', (c: Buffer) => { text += c.toString('latin1'); });
  sock.on('error', () => { /* the hub may destroy a stalled stream */ });
  await ready;
  return { client, sock, received: () => text, clock, closedWhy: () => closedWhy };
}

const tick = () => new Promise((r) => setImmediate(r));

/** Offer messages until the client is behind (bounded: 8,000 messages, about 33 MB offered). */
async function fillUntilBehind(r: Rig): Promise<{ offered: number; sent: number }> {
  let sent = 0, offered = 0;
  for (; offered < 8000 && !r.client.behind; offered++) {
    if (r.client.offer(MSG) === 'sent') sent++;
    if (offered % 50 === 0) await tick();
  }
  return { offered, sent };
}

t.test('a client that never reads: the hub buffers at most the limit plus one message, then skips', async (t) => {
  const r = await rig(t, 60_000);
  r.sock.pause();
  const { offered, sent } = await fillUntilBehind(r);
  t.ok(r.client.behind, `behind after ${offered} messages (${sent} written before the socket filled)`);
  let skipped = 0;
  for (let i = 0; i < 2000; i++) if (r.client.offer(MSG) === 'skipped') skipped++;
  t.equal(skipped, 2000, 'every later message skipped while behind');
  t.ok(r.client.peakBuffered <= LIMIT + MSG.length, `peak buffered ${r.client.peakBuffered} B <= ${LIMIT + MSG.length} B`);
  t.ok(r.client.buffered <= LIMIT + MSG.length, 'still bounded after 2,000 more offers');
  t.ok(r.client.skipped >= 2000, `${r.client.skipped} skipped`);
});

t.test('a client that reads again gets one fresh snapshot in place of what it missed', async (t) => {
  const r = await rig(t, 60_000);
  r.sock.pause();
  await fillUntilBehind(r);
  for (let i = 0; i < 100; i++) r.client.offer(MSG);
  r.sock.resume();
  const deadline = Date.now() + 20_000;
  while (!r.received().includes('event: resync') && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
  t.ok(r.received().includes('event: resync'), 'the resync snapshot arrived');
  t.notOk(r.client.behind, 'no longer behind');
  t.equal(r.client.offer(MSG), 'sent', 'messages flow again');
  t.equal(r.received().split('event: resync').length - 1, 1, 'exactly one snapshot');
});

t.test('a client behind past the stall time is dropped and its connection closed', async (t) => {
  const r = await rig(t, 15_000);
  r.sock.pause();
  await fillUntilBehind(r);
  r.clock.now += 14_000;
  t.equal(r.client.offer(MSG), 'skipped', 'still within the stall time');
  r.clock.now += 2_000;
  t.equal(r.client.offer(MSG), 'dropped', 'dropped past it');
  t.equal(r.closedWhy(), 'stalled');
  t.ok(r.client.closed, 'closed');
  // The hub destroyed the connection, so what it held for the client is gone: the client, reading
  // again, sees the stream end instead of the backlog ever arriving in full.
  const ended = new Promise<boolean>((res) => { r.sock.once('close', () => res(true)); setTimeout(() => res(false), 10_000).unref(); });
  r.sock.resume();
  t.ok(await ended, 'the hub closed the stalled connection');
  t.notOk(r.received().includes('event: resync'), 'no snapshot was sent to a dropped client');
  t.equal(r.client.offer(MSG), 'dropped', 'a closed client takes nothing');
});
