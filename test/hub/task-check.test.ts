import t from 'tap';
import { TaskSpecSchema } from '../../hub/task-schema.js';
import { TASK_SPEC } from '#gen/task-check.js';
import { clone } from '../helpers/clone.js';
import { TaskStore } from '../../hub/store.js';
import { rng } from '../helpers/rng.js';

const KEYS = ['id', 'prompt', 'role', 'caps', 'priority', 'max_tokens', 'stop', 'temperature', 'seed', 'grammar', 'json_schema', 'timeout_ms', 'max_attempts', 'meta', 'extra', '__proto__'];
const POOL: unknown[] = [
  undefined, null, true, false, 0, -0, -1, 1, 1.5, 10, 100, 101, 1_000_000, 1_000_001, -1_000_000, -1_000_001, 2 ** 53 - 1, 2 ** 53, 1e308, NaN, Infinity,
  '', 'x', 'a b', 'a/b', 'ok-1', 'a'.repeat(128), 'a'.repeat(129), 'a'.repeat(256), 'a'.repeat(257), '\u00a0', 'é',
  [], ['a'], [1], Array(16).fill('s'), Array(17).fill('s'), Array(64).fill('c'), Array(65).fill('c'), ['a'.repeat(257)],
  {}, { a: 1 }, { a: 's', b: true, c: 2.5 }, { a: null }, { a: [] }, { a: {} }, JSON.parse('{"__proto__":{"p":1},"k":1}'),
];

function value(r: () => number): Record<string, unknown> {
  const o: Record<string, unknown> = r() < 0.9 ? { prompt: 'task ' + Math.floor(r() * 100) } : {};
  const n = Math.floor(r() * 4);
  for (let i = 0; i < n; i++) {
    const k = KEYS[Math.floor(r() * KEYS.length)]!;
    const v = POOL[Math.floor(r() * POOL.length)];
    if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
    else if (v !== undefined || r() < 0.5) o[k] = v;
  }
  return o;
}

t.test('the generated task check accepts exactly what TaskSpecSchema accepts, with the same result', async (t) => {
  const r = rng(7);
  let accepted = 0, refused = 0;
  for (let i = 0; i < 20_000; i++) {
    const v = r() < 0.05 ? POOL[Math.floor(r() * POOL.length)] : value(r);
    const z = TaskSpecSchema.safeParse(clone(v));
    const out = clone(v);
    const fast = TASK_SPEC(out) ? out : undefined;
    if (z.success !== (fast !== undefined)) { t.fail(`zod ${z.success ? 'accepts' : 'refuses'}, the check ${fast ? 'accepts' : 'refuses'}`, { value: v, zod: z.success ? z.data : z.error.issues }); continue; }
    if (z.success) { accepted++; if (JSON.stringify(fast) !== JSON.stringify(z.data) && !t.strictSame(fast, z.data)) break; } else refused++;
  }
  t.ok(accepted > 2000 && refused > 2000, `both sides exercised: ${accepted} accepted, ${refused} refused`);
});

t.test('a refused task is explained, naming its place in the batch and a misspelt field', async (t) => {
  t.throws(() => TaskStore.parse({ prompt: 'x', priority: 1.5 }, 2), { code: 'SWARM_ERR_BAD_PAYLOAD', message: /^task 3: priority: / });
  t.throws(() => TaskStore.parse({ prompt: 'x', colour: 'red' }, 0), { code: 'SWARM_ERR_BAD_PAYLOAD', message: /^task 1: .*colour/ });
  t.throws(() => TaskStore.parse({ promt: 'x' }, 0), { code: 'SWARM_ERR_BAD_PAYLOAD', message: 'task 1: unknown field "promt" (did you mean "prompt"?)' }, 'the misspelt field, not the one it leaves missing');
  t.throws(() => TaskStore.parse({ prompt: 'x', meta: { a: [] } }, 0), { message: /^task 1: meta\.a: must be / });
  t.same(TaskStore.parse({ prompt: 'x' }), { prompt: 'x', priority: 0 });
});
