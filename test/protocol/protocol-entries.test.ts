import t from 'tap';
import { validate } from '../../protocol/index.js';

const state = (entries: unknown[]) => ({ ver: 1, id: 'h-1', type: 'STATE', payload: { entries } });

t.test('STATE and HANDBACK entries are checked field by field; spec fields beyond the typed ones ride along', async (t) => {
  const good = validate(state([
    { id: 't-1', spec: { id: 't-1', prompt: 'p', priority: 5, meta: { run: 'r' } }, seq: 0 },
    { id: 't-2', lease: { worker: 'w-1', attempt: 2, epoch: 3, until: 1e12, revoked: true, unrun: 1 } },
    { id: 't-3', result: { worker: 'w-1', attempt: 1, text: 'ok', receipt: { duration_ms: 3 } } },
    { id: 't-4', failure: { worker: 'w-1', attempt: 3, error: { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: 'x' } } },
  ]));
  t.ok(good.ok, 'well-formed entries pass');
  if (good.ok && good.msg.type === 'STATE') t.same(good.msg.payload.entries[0]!.spec!.meta, { run: 'r' }, 'meta kept');
  for (const [why, e] of [
    ['a lease without its worker', { id: 'a', lease: { attempt: 1, epoch: 0, until: 0 } }],
    ['a negative seq', { id: 'a', seq: -1 }],
    ['a result whose text is a number', { id: 'a', result: { worker: 'w', attempt: 1, text: 5 } }],
    ['a spec without its id', { id: 'a', spec: { prompt: 'p' } }],
    ['a receipt without duration', { id: 'a', result: { worker: 'w', attempt: 1, receipt: {} } }],
  ] as const) {
    const v = validate(state([e]));
    t.equal(v.ok ? 'ok' : v.code, 'SWARM_ERR_BAD_PAYLOAD', `refused: ${why}`);
  }
  const hb = validate({ ver: 1, id: 'w-1', type: 'HANDBACK', payload: { entries: [{ id: 'a', lease: { worker: 'w', attempt: 'x', epoch: 0, until: 0 } }] } });
  t.equal(hb.ok ? 'ok' : hb.code, 'SWARM_ERR_BAD_PAYLOAD', 'HANDBACK entries are checked the same way');
});
