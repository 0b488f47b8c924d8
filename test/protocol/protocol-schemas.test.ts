import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { Envelope, Payloads } from '../../protocol/schemas.js';
import { schemasSource } from '../../protocol/gen-schemas.js';
import { ENVELOPE_SCHEMA, PAYLOAD_SCHEMAS } from '../../protocol/schemas.gen.js';
import { FAIL, compile, type Issue } from '../../protocol/json-schema.js';
import { Type, validate } from '../../protocol/index.js';
import { rng } from '../helpers/rng.js';
import { ROOT } from '../helpers/paths.js';

const doc = fs.readFileSync(path.join(ROOT, 'protocol', 'PROTOCOL.md'), 'utf8');

t.test('schemas.gen.ts is generated from the zod schemas as they are now', async (t) => {
  const current = fs.readFileSync(path.join(ROOT, 'protocol', 'schemas.gen.ts'), 'utf8');
  t.equal(current, schemasSource(), 'stale: run `npx tsc -p . && node dist/protocol/gen-schemas.js && npx tsc -p .`');
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

/** Every own key and value, nested, as text (keys sorted: order is not content): what a check must leave as it found it. */
function sig(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sig).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${sig((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return typeof v === 'number' ? String(v) + (Object.is(v, -0) ? '-0' : '') : typeof v === 'string' ? JSON.stringify(v) : String(v);
}

t.test('the generated checker accepts, fills and drops exactly what zod does', async (t) => {
  const r = rng(42);
  let compared = 0;
  let same = 0;
  const agree = (what: string, zod: { safeParse(v: unknown): { success: boolean; data?: unknown } }, check: ReturnType<typeof compile>, v: unknown) => {
    const z = zod.safeParse(v);
    const issues: Issue[] = [];
    const before = sig(v);
    const out = check(v, issues);
    compared++;
    if (sig(v) !== before) t.fail(`${what}: the checker changed its input`, { value: v });
    // A value already in shape comes back as the same object; anything zod changed comes back as a copy.
    if (z.success && out !== FAIL && typeof v === 'object' && v !== null) {
      const unchanged = sig(z.data) === before;
      if (unchanged !== (out === v)) t.fail(`${what}: ${unchanged ? 'an in-shape value was copied' : 'a changed value was not copied'}`, { value: v });
      if (unchanged) same++;
    }
    if (z.success !== (out !== FAIL)) t.fail(`${what}: zod ${z.success ? 'accepts' : 'refuses'}, the checker ${out !== FAIL ? 'accepts' : 'refuses'}`, { value: v, issues });
    else if (z.success) t.strictSame(out, z.data, `${what}: same parsed value`, { value: v, skip: false });
    else t.ok(issues.length > 0, `${what}: a refusal says why`);
  };
  const envelope = compile(ENVELOPE_SCHEMA);
  for (const ex of examples()) {
    const type = ex.type as Type;
    const check = compile(PAYLOAD_SCHEMAS[type]);
    const payload = ex.payload as Record<string, unknown>;
    const keys = Object.keys((PAYLOAD_SCHEMAS[type].properties ?? {}));
    agree(type, Payloads[type], check, payload);
    for (let i = 0; i < 300; i++) agree(type, Payloads[type], check, mutate(payload, keys, r));
    for (let i = 0; i < 50; i++) agree('envelope', Envelope, envelope, mutate(ex, ['ver', 'id', 'type', 'src', 'dst', 're', 'payload'], r));
  }
  t.ok(compared > 1000, `${compared} values compared`);
  t.ok(same > 100, `${same} in-shape values returned as they came`);
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
