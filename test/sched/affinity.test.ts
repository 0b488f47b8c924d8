import t, { type Test } from 'tap';
import { PROMPT_CACHE_CAP } from '../../protocol/index.js';
import { pickByPrefix, sharedPrefix, promptKey, sharedKeyPrefix, MIN_AFFINITY_CHARS, CHUNK_CHARS, MAX_COMPARE } from '../../sched/index.js';
import { handshakeCaps } from '../../worker/prompt-cache.js';
import type { StoreEvent } from '../../hub/store.js';
import { startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';

const DOC = 'The same long input document that every agent of the topology reads first. ';

t.test('the worker whose last prompt shares the longest start wins; a tie keeps today\'s order', async (t) => {
  t.equal(sharedPrefix('abcdef', 'abcxyz'), 3);
  t.equal(pickByPrefix(DOC + 'q1', [undefined, 'other', DOC + 'q0']), 2, 'the worker that read the document');
  t.equal(pickByPrefix(DOC + 'q1', [DOC + 'q0', DOC + 'q2']), 0, 'tie: the first');
  t.equal(pickByPrefix(DOC + 'q1', ['x', DOC + 'q0', DOC + 'q2']), 1, 'tie among the others: the earlier one');
  t.equal(pickByPrefix(DOC + 'q1', ['x', DOC.slice(0, MIN_AFFINITY_CHARS - 1)]), 0, 'too short a start is no reason to move');
  t.equal(pickByPrefix('anything', []), 0);
});

t.test('the chunked compare finds the exact shared start, across chunks and inside one', async (t) => {
  const base = Array.from({ length: 5 * CHUNK_CHARS }, (_, i) => String.fromCharCode(97 + (i * 7) % 26)).join('');
  for (const at of [0, 1, CHUNK_CHARS - 1, CHUNK_CHARS, CHUNK_CHARS + 1, 3 * CHUNK_CHARS + 17, 5 * CHUNK_CHARS - 1]) {
    const other = base.slice(0, at) + '#' + base.slice(at + 1);
    t.equal(sharedPrefix(base, other), at, `differs at ${at}`);
  }
  t.equal(sharedPrefix(base, base.slice(0, 2 * CHUNK_CHARS + 5)), 2 * CHUNK_CHARS + 5, 'one is the start of the other');
  t.equal(sharedPrefix(base, base), base.length, 'equal');
  t.equal(sharedPrefix('', base), 0);
  // The compare is bounded: prompts longer than the bound share at most the bound.
  const long = 'x'.repeat(MAX_COMPARE + 5000);
  t.equal(sharedPrefix(long, long + 'y'), MAX_COMPARE);
  t.equal(promptKey(long).chunks.length, MAX_COMPARE / CHUNK_CHARS, 'the key holds at most MAX_COMPARE characters');
  t.equal(sharedKeyPrefix(promptKey(DOC + 'a'), promptKey(DOC + 'b')), DOC.length);
});

t.test('only engines that keep their prompt announce the prompt-cache cap', async (t) => {
  t.same(handshakeCaps(['code'], { name: 'batched', options: {} }), ['code', PROMPT_CACHE_CAP]);
  t.same(handshakeCaps(undefined, { name: 'llama-server', options: { url: 'http://127.0.0.1:1' } }), [PROMPT_CACHE_CAP]);
  t.same(handshakeCaps([PROMPT_CACHE_CAP], { name: 'batched', options: {} }), [PROMPT_CACHE_CAP], 'not twice');
  t.same(handshakeCaps(['code'], { name: 'echo', options: {} }), ['code']);
  t.same(handshakeCaps(undefined, { name: 'embedded', options: {} }), []);
});

/** Three prompt-keeping workers, each given a different document; the store's events recorded. */
async function threeHolders(t: Test, caps: string[]) {
  const { hub, addr, stop } = await startHub();
  t.teardown(stop);
  const pool = startPool(addr, 3, { caps });
  t.teardown(pool.stop);
  t.ok(await waitWorkers(hub, 3));
  const events: StoreEvent['type'][] = [];
  t.teardown(hub.store.subscribe((e) => events.push(e.type)));
  // One task each (all three free and idle): each worker now holds a different document.
  const docs = ['alpha document, long enough to matter: ', 'beta document, long enough to matter: ', 'gamma document, long enough to matter: '];
  await hub.submit(docs.map((d, i) => ({ id: `first-${i}`, prompt: d + 'first' })));
  t.ok(await waitTasks(hub, 3));
  const holder = new Map(docs.map((d, i) => [d, hub.store.queue.get(`first-${i}`)!.result!.receipt?.worker]));
  t.equal(new Set(holder.values()).size, 3, 'one document per worker');
  return { hub, docs, holder, events };
}

t.test('the hub sends a task to the free prompt-keeping worker whose last prompt starts like it, with one lease', async (t) => {
  const { hub, docs, holder, events } = await threeHolders(t, [PROMPT_CACHE_CAP]);
  t.ok([...hub.registry.all()].every((w) => w.keepsPrompts), 'the cap marks the workers as keeping prompts');
  // Follow-ups, one at a time so that every worker is free: each goes to its document's holder.
  for (const [round, d] of [...docs, ...docs.slice().reverse()].entries()) {
    await hub.submit([{ id: `next-${round}`, prompt: d + `question ${round}` }]);
    t.ok(await waitTasks(hub, 4 + round));
    t.equal(hub.store.queue.get(`next-${round}`)!.result!.receipt?.worker, holder.get(d), `${d.split(' ')[0]} follow-up went to its holder`);
  }
  t.equal(events.filter((e) => e === 'requeued').length, 0, 'choosing the worker took nothing back (no requeued event)');
  t.equal(events.filter((e) => e === 'leased').length, 9, 'one lease per task');
});

t.test('workers without the cap are not steered: follow-ups go where today\'s order sends them', async (t) => {
  const { hub, docs, holder, events } = await threeHolders(t, []);
  t.notOk([...hub.registry.all()].some((w) => w.keepsPrompts));
  // Today's order hands a task to the free worker that has waited longest, so three follow-ups of one
  // document, one at a time, go round the workers; steered, all three would go to its holder.
  const got = new Set<string | undefined>();
  for (let round = 0; round < 3; round++) {
    await hub.submit([{ id: `next-${round}`, prompt: docs[0]! + `question ${round}` }]);
    t.ok(await waitTasks(hub, 4 + round));
    got.add(hub.store.queue.get(`next-${round}`)!.result!.receipt?.worker);
  }
  t.ok(got.size > 1, `not all to ${holder.get(docs[0]!)}: ${[...got].join(', ')}`);
  t.equal(events.filter((e) => e === 'requeued').length, 0);
});
