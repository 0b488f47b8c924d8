import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { Envelope, Payloads } from '../../protocol/schemas.js';
import { TARGETS, source } from '../../protocol/gen-validators.js';
import { ENVELOPE, PAYLOAD_CHECKS } from '#gen/protocol-validators.js';
import type { Check } from '../../protocol/check.js';
import { Type, validate } from '../../protocol/index.js';
import { rng } from '../helpers/rng.js';
import { clone } from '../helpers/clone.js';
import { ROOT } from '../helpers/paths.js';

const doc = fs.readFileSync(path.join(ROOT, 'protocol', 'PROTOCOL.md'), 'utf8');

t.test('the generated validators and their committed types are those of the zod schemas as they are now', async (t) => {
  for (const target of TARGETS) {
    const { js, dts } = await source(target);
    t.ok(fs.readFileSync(path.join(ROOT, target.file), 'utf8') === js, `${target.file} is stale: run \`npm run build\``);
    t.ok(fs.readFileSync(path.join(ROOT, target.file.replace(/\.js$/, '.d.ts')), 'utf8') === dts, `its .d.ts is stale: run \`npm run build\` and commit it`);
  }
});

const POOL: unknown[] = [
  undefined, null, true, false, 0, -0, -1, 1, 2, 1.5, 10, 10.5, 1024, 1025, 2 ** 53, -(2 ** 53), 1e308, Infinity, -Infinity, NaN,
  '', 'x', 'ok', 'ndjson', 'msgpack', 'SWARM_ERR_AUTH', 'NOT_A_CODE', 'a'.repeat(32), 'a'.repeat(33), 'a'.repeat(128), 'a'.repeat(129),
  'a'.repeat(256), 'a'.repeat(257), 'a'.repeat(1025), [], ['a'], [1], [null], Array(8).fill('s'), Array(9).fill('s'),
  Array(16).fill('s'), Array(17).fill('s'), Array(65).fill('s'), [{ id: 'x' }], [{ id: '' }], [{ id: 'x', peer_addr: 'h:1' }],
  [{ id: 'x', extra: 1 }], {}, { id: 'x' }, { heartbeat_ms: 1, dead_after_ms: 2 }, { heartbeat_ms: 0, dead_after_ms: 2, more: 'x' },
  { duration_ms: 1 }, { duration_ms: -1 }, { duration_ms: 1, tokens_out: 1.5 }, JSON.parse('{"__proto__":{"polluted":1},"k":1}'),
];

/** Valid examples of every type, from PROTOCOL.md (protocol-doc.test.ts checks there is one per type). */
function examples(): Record<string, unknown>[] {
  return [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!.trim()) as Record<string, unknown>);
}

function mutate(base: Record<string, unknown>, keys: string[], r: () => number): Record<string, unknown> {
  const o: Record<string, unknown> = structuredClone(base);
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const k = r() < 0.15 ? `extra${Math.floor(r() * 3)}` : r() < 0.05 ? '__proto__' : keys[Math.floor(r() * keys.length)]!;
    const v = POOL[Math.floor(r() * POOL.length)];
    if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
    else if (v === undefined && r() < 0.5) delete o[k];
    else o[k] = v;
  }
  return o;
}

t.test('the generated checks accept, fill and drop exactly what zod does', async (t) => {
  const r = rng(42);
  let compared = 0;
  const agree = (what: string, zod: { safeParse(v: unknown): { success: boolean; data?: unknown } }, check: Check, v: unknown) => {
    const z = zod.safeParse(clone(v));
    const out = clone(v);
    const ok = check(out);
    compared++;
    if (z.success !== ok) t.fail(`${what}: zod ${z.success ? 'accepts' : 'refuses'}, the check ${ok ? 'accepts' : 'refuses'}`, { value: v, errors: check.errors });
    else if (z.success) t.strictSame(out, z.data, `${what}: same parsed value`, { value: v, skip: false });
    else t.ok(check.errors?.length, `${what}: a refusal says why`);
  };
  for (const ex of examples()) {
    const type = ex.type as Type;
    const payload = ex.payload as Record<string, unknown>;
    const keys = Object.keys(Payloads[type].shape);
    agree(type, Payloads[type], PAYLOAD_CHECKS[type], payload);
    for (let i = 0; i < 300; i++) agree(type, Payloads[type], PAYLOAD_CHECKS[type], mutate(payload, keys, r));
    for (let i = 0; i < 50; i++) agree('envelope', Envelope, ENVELOPE, mutate(ex, ['ver', 'id', 'type', 'src', 'dst', 're', 'payload'], r));
  }
  t.ok(compared > 1000, `${compared} values compared`);
});

t.test('validate() never lets __proto__ through and fills defaults', async (t) => {
  const v = validate(JSON.parse('{"ver":1,"id":"m1","type":"TASK_REQ","payload":{"task_id":"t1","prompt":"hi","__proto__":{"polluted":1},"json_schema":{"__proto__":{"x":1},"a":1}}}'));
  t.ok(v.ok);
  if (!v.ok || v.msg.type !== Type.TASK_REQ) return;
  t.same(v.msg.payload.stop, []);
  t.equal(v.msg.payload.attempt, 1);
  t.equal(Object.getPrototypeOf(v.msg.payload), Object.prototype);
  t.equal(Object.getPrototypeOf(v.msg.payload.json_schema), Object.prototype);
  t.equal(({} as Record<string, unknown>).polluted, undefined);
  const bad = validate({ ver: 1, id: 'm2', type: 'HEARTBEAT', payload: { load: -1 } });
  t.match(bad, { ok: false, code: 'SWARM_ERR_BAD_PAYLOAD', re: 'm2' });
});
