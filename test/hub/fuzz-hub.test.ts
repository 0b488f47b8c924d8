import t from 'tap';
import net from 'node:net';
import crypto from 'node:crypto';
import { startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';

/** Open a raw connection, send `bytes`, collect what comes back until close or timeout. */
async function blast(addr: { host: string; port: number }, chunks: (Buffer | string)[], ms = 1500) {
  const sock = net.connect(addr);
  await new Promise((r) => sock.once('connect', r));
  let got = '';
  let closed = false;
  sock.on('data', (c) => (got += c.toString('utf8')));
  sock.on('error', () => {});
  for (const c of chunks) if (!sock.destroyed) sock.write(c);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    sock.once('close', () => { closed = true; clearTimeout(timer); resolve(); });
  });
  sock.destroy();
  const frames = got.split('\n').filter(Boolean).flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });
  return { frames, closed };
}

t.test('the hub survives garbage and answers with error codes', async (t) => {
  const { hub, addr, stop } = await startHub({ maxLine: 64 * 1024, handshakeTimeoutMs: 1000 });
  t.teardown(stop);
  const codes = new Set<string>();
  const cases: (Buffer | string)[][] = [
    [crypto.randomBytes(4096)],
    ['not json\n'],
    [Buffer.from([0xff, 0xfe, 0xfd, 0x0a])],
    ['{"ver":2,"id":"a","type":"HANDSHAKE","payload":{}}\n'],
    ['{"ver":1,"id":"b","type":"NOPE","payload":{}}\n'],
    ['{"ver":1,"id":"c","type":"HANDSHAKE","payload":{"driver":5}}\n'],
    ['{"ver":1,"id":"d","type":"TASK_RES","payload":{"task_id":"x","done":true}}\n'],
    ['{"__proto__":{"polluted":true},"ver":1,"id":"e","type":"HANDSHAKE","payload":{"__proto__":{"polluted":true},"driver":"x","constructor":{"prototype":{"polluted":true}}}}\n'],
    ['x'.repeat(200 * 1024) + '\n'],
    ['[1,2,3]\n', 'null\n', '"str"\n', '{}\n'],
  ];
  for (const c of cases) {
    const r = await blast(addr, c);
    for (const f of r.frames) if (f.type === 'ERROR') codes.add(f.payload.code);
  }
  for (let i = 0; i < 30; i++) await blast(addr, [crypto.randomBytes(1 + (i * 97) % 3000), '\n'], 100);
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype not polluted');
  for (const c of ['SWARM_ERR_BAD_JSON', 'SWARM_ERR_BAD_VERSION', 'SWARM_ERR_UNKNOWN_TYPE', 'SWARM_ERR_BAD_PAYLOAD', 'SWARM_ERR_NOT_READY', 'SWARM_ERR_LINE_TOO_LONG', 'SWARM_ERR_BAD_ENVELOPE']) {
    t.ok(codes.has(c), `answered ${c}`);
  }
  // A peer that keeps sending garbage is disconnected.
  const spam = await blast(addr, [Array.from({ length: 100 }, () => 'garbage\n').join('')], 3000);
  t.ok(spam.closed, 'garbage spammer disconnected');
  t.ok(spam.frames.some((f) => f.payload?.code === 'SWARM_ERR_TOO_MANY_ERRORS'));
  // And the hub still works.
  const pool = startPool(addr, 2);
  t.teardown(() => pool.stop());
  t.ok(await waitWorkers(hub, 2));
  await hub.submit(Array.from({ length: 20 }, (_, i) => ({ prompt: `after ${i}`, id: `f-${i}` })));
  t.ok(await waitTasks(hub, 20), 'tasks still run after the fuzzing');
  t.equal(hub.store.queue.counts().done, 20);
});
