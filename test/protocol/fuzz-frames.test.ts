import t from 'tap';
import { ErrorCode, Type } from '../../protocol/index.js';
import { startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';
import { RawWorker, type Frame } from '../helpers/raw-worker.js';
import { rng } from '../helpers/rng.js';

/**
 * Frames a confused or hostile worker might send after its handshake: every message type (and some
 * that are not), with fields of every kind, task ids and `re`s that name its real leases or not.
 */
function mutant(r: () => number, leased: Frame[], msgpack: boolean): { type: string; payload: unknown; re?: string } {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const lease = leased.length ? pick(leased) : undefined;
  const values: (() => unknown)[] = [
    () => null, () => true, () => -1, () => 0, () => 2 ** 53 + 2, () => 1e308, () => -0.5, () => r() * 1e6,
    () => 'x'.repeat(Math.floor(r() * 5000)), () => '', () => 'SWARM_ERR_TASK_FAILED', () => lease?.payload.task_id ?? 't-none',
    () => [1, 'a', { b: [] }], () => ({ __proto__: { polluted: true } }), () => JSON.parse('{"__proto__":{"polluted":true}}'),
    () => Array.from({ length: 200 }, (_, i) => i), () => (msgpack ? BigInt(Math.floor(r() * 1e12)) : Math.floor(r() * 1e12)),
  ];
  const v = () => pick(values)();
  const type = pick([...Object.values(Type), 'NOPE', '', 'task_res']);
  const base: Record<string, unknown> = {
    TASK_RES: { task_id: r() < 0.7 ? lease?.payload.task_id ?? 'x' : v(), text: r() < 0.7 ? 'piece' : v(), done: r() < 0.5 ? r() < 0.5 : v(), seq: r() < 0.6 ? Math.floor(r() * 6) : v() },
    ERROR: { code: r() < 0.5 ? pick(Object.keys(ErrorCode)) : v(), msg: r() < 0.7 ? 'boom' : v(), task_id: r() < 0.7 ? lease?.payload.task_id : v(), status: v() },
    ASSIGN_ROLE: { role: v() }, ACK: { ok: v(), extra: v() }, HEARTBEAT: { load: v(), status: v(), inflight: v() },
    HANDBACK: { entries: r() < 0.5 ? [{ id: lease?.payload.task_id ?? 'x', result: { worker: 'w', attempt: v(), text: v() } }] : v() },
  };
  const payload = r() < 0.1 ? v() : { ...(base[type] as object ?? {}), ...(r() < 0.3 ? { [pick(['task_id', 'text', 'done', 'seq', 'code', 'role', 'zzz'])]: v() } : {}) };
  return { type, payload, re: r() < 0.5 ? lease?.id : undefined };
}

for (const codec of ['ndjson', 'msgpack'] as const) {
  t.test(`post-handshake fuzz (${codec}): the hub answers codes, stays up, and still runs tasks right`, async (t) => {
    const { hub, addr, stop } = await startHub({ maxLine: 64 * 1024, heartbeatMs: 200, msgpack: codec === 'msgpack' });
    t.teardown(stop);
    const r = rng(codec === 'ndjson' ? 1 : 2);
    const codes = new Set<string>();
    await hub.submit(Array.from({ length: 40 }, (_, i) => ({ id: `${codec}-z${i}`, prompt: `z${i}`, max_attempts: 100 })));
    for (let c = 0; c < 40; c++) {
      const w = await RawWorker.connect(addr);
      const ack = await w.handshake({ worker_id: `fz-${c}`, slots: 4, codecs: codec === 'msgpack' ? ['msgpack'] : ['ndjson'] });
      if (ack?.type !== 'HANDSHAKE_ACK') { t.fail(`fz-${c} not accepted`); w.destroy(); continue; }
      await w.next((f) => f.type === 'TASK_REQ', 200);
      const leased = w.frames.filter((f) => f.type === 'TASK_REQ');
      for (let i = 0; i < 12 && !w.closed; i++) {
        const m = mutant(r, leased, codec === 'msgpack');
        try { w.send(m.type, m.payload, { re: m.re }); } catch { /* not encodable: skip */ }
      }
      w.send('HEARTBEAT', { load: 0, status: 'idle' });
      await w.next(() => false, 50);
      for (const f of w.frames) if (f.type === 'ERROR') codes.add(f.payload.code);
      w.destroy();
    }
    t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype not polluted');
    for (const code of codes) t.ok(code in ErrorCode, `answered with a catalogue code: ${code}`);
    t.ok(codes.has('SWARM_ERR_BAD_PAYLOAD'), 'bad payloads were answered');
    // Every fuzzed task reaches a final state once real workers are there, and fresh tasks come out right.
    const pool = startPool(addr, 2, { prefix: `good-${codec}` });
    t.teardown(() => pool.stop());
    t.ok(await waitWorkers(hub, 2));
    t.ok(await waitTasks(hub, 40, 60_000), 'the fuzzed tasks all finished');
    await hub.submit(Array.from({ length: 20 }, (_, i) => ({ id: `${codec}-ok${i}`, prompt: `ok ${i}` })));
    t.ok(await waitTasks(hub, 60, 60_000));
    for (let i = 0; i < 20; i++) t.equal(hub.store.queue.get(`${codec}-ok${i}`)?.result?.text, `echo: ok ${i}`, '', { diagnostic: false });
  });
}
