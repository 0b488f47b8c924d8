import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { ControlServer } from '../../hub/index.js';
import { call } from '../../cli/http.js';
import type { HubFile } from '../../cli/state.js';
import { quiet, startHub } from '../helpers/inproc.js';

/** GET on `agent`; resolves with the status, whether the request went out on a pooled socket, and the Keep-Alive header. */
function get(agent: http.Agent, port: number, path: string): Promise<{ status: number; reused: boolean; keepAlive?: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket, keepAlive: String(res.headers['keep-alive'] ?? '') }));
    });
    req.on('error', reject);
  });
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('the control API keeps an idle keep-alive connection past the old 5 s: a pooled client reuses it', async (t) => {
  const { hub, stop } = await startHub();
  const control = new ControlServer(hub, { host: '127.0.0.1', port: 0 }, quiet);
  const addr = await control.start();
  t.teardown(async () => { await control.stop(); await stop(); });

  // One socket, kept in the pool as long as the server says it may (its Keep-Alive hint).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1, timeout: 60_000 });
  t.teardown(() => agent.destroy());
  const first = await get(agent, addr.port, '/healthz');
  t.equal(first.status, 200);
  // The idle time the server allows is the one it announces (node derives the header from the
  // server's keepAliveTimeout): past the old 5 s, so no fixed 6 s wait is needed to show it.
  const announced = Number(/timeout=(\d+)/.exec(first.keepAlive ?? '')?.[1]);
  t.ok(announced > 5, `the server announces idle connections are kept ${announced} s (more than the old 5 s)`);
  await pause(1000); // idle a while, then reuse
  const second = await get(agent, addr.port, '/healthz');
  t.equal(second.status, 200, 'the request after the idle pause succeeds');
  t.equal(second.reused, true, 'on the same connection: the server did not close it while idle');
});

/**
 * A server that answers every request on a connection's first use, and resets a connection when it
 * is reused: what a client sees when a server closes an idle connection just as it is reused.
 */
async function resettingServer(t: { teardown(fn: () => unknown): void }): Promise<{ port: number; requests: () => number }> {
  let requests = 0;
  const socks = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    socks.add(sock);
    let used = false;
    let buf = '';
    sock.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      buf = '';
      requests++;
      if (used) { sock.resetAndDestroy(); return; }
      used = true;
      const body = '{"ok":true}';
      sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\nkeep-alive: timeout=60\r\n\r\n${body}`);
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => { server.close(() => r()); for (const s of socks) s.destroy(); }));
  return { port: (server.address() as net.AddressInfo).port, requests: () => requests };
}

t.test('the CLI client retries a GET once when a reused socket is reset, and never a POST', async (t) => {
  const srv = await resettingServer(t);
  const hub = { control: { host: '127.0.0.1', port: srv.port } } as HubFile;
  t.same(await call(hub, 'GET', '/status'), { ok: true });
  // The pooled socket is reused and reset: the GET goes out again on a fresh socket.
  t.same(await call(hub, 'GET', '/status'), { ok: true }, 'GET on a reset pooled socket succeeds on the retry');
  t.equal(srv.requests(), 3, 'one retry');
  // A POST on a reset pooled socket is not sent twice: the error reaches the caller.
  await t.rejects(call(hub, 'POST', '/tasks', { prompt: 'x' }), { code: 'SWARM_ERR_NO_SWARM' });
  t.equal(srv.requests(), 4, 'no retry of a POST');
});
