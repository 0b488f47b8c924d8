import net from 'node:net';
import t from 'tap';
import { Connection, Type } from '../../protocol/index.js';

/** A loopback socket pair: the client end wrapped in a Connection (its socket writes counted), the server end read raw. */
async function pair() {
  let far!: net.Socket;
  const server = net.createServer((s) => { far = s; });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const near = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((r) => near.once('connect', r));
  while (!far) await new Promise((r) => setTimeout(r, 1));
  const conn = new Connection(near, { name: 'w' });
  let n = 0;
  const write = near.write.bind(near);
  near.write = ((...a: Parameters<typeof near.write>) => { n++; return write(...a); }) as typeof near.write;
  return { conn, far, writes: () => n, close: () => { near.destroy(); far.destroy(); server.close(); } };
}

t.test('frames sent in one turn of the event loop, across awaits, leave in one write', async (t) => {
  const { conn, far, writes, close } = await pair();
  t.teardown(close);
  let got = '';
  far.on('data', (c: Buffer) => { got += c.toString(); });
  // As an agent finishing queued short tasks: each result is sent after awaits of its own.
  const finish = async (i: number) => { await Promise.resolve(); await Promise.resolve(); conn.send(Type.HEARTBEAT, { load: i, status: 'idle' }); };
  await Promise.all([0, 1, 2, 3, 4].map(async (i) => { for (let k = 0; k < i; k++) await null; await finish(i); }));
  await new Promise((r) => setImmediate(r));
  t.equal(writes(), 1, 'five frames, one socket write');
  await new Promise((r) => setTimeout(r, 50));
  t.equal(got.trim().split('\n').length, 5, 'all five arrive');
  t.same(got.trim().split('\n').map((l) => JSON.parse(l).payload.load), [0, 1, 2, 3, 4], 'in the order sent');
});

t.test('a frame sent on a later turn goes in a write of its own, without waiting for more', async (t) => {
  const { conn, far, writes, close } = await pair();
  t.teardown(close);
  let lines = 0;
  far.on('data', (c: Buffer) => { lines += c.toString().split('\n').length - 1; });
  conn.send(Type.HEARTBEAT, { load: 1, status: 'idle' });
  await new Promise((r) => setTimeout(r, 20));
  conn.send(Type.HEARTBEAT, { load: 2, status: 'idle' });
  await new Promise((r) => setTimeout(r, 20));
  t.equal(writes(), 2);
  t.equal(lines, 2, 'each arrived on its own');
});
