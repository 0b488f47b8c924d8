import t from 'tap';
import { Tombstones } from '../../hub/dup-window.js';
import { DEFAULT_RETAIN } from '../../hub/retention.js';
import { TaskStore } from '../../hub/store.js';
import { tempDir } from '../helpers/cli.js';

const HOUR = 3600_000;
const stone = (at: number, offset = 0, acc?: number) => ({ file: 1, offset, at, ...(acc !== undefined ? { acc } : {}) });

t.test('the window holds at most cap ids: past it the oldest leave first, across the ring\'s wrap-around', async (t) => {
  const w = new Tombstones({ ageMs: HOUR, count: 1 });
  const cap = w.cap;
  t.equal(cap, DEFAULT_RETAIN.count, 'never fewer than the default count');
  const total = cap * 2 + 17; // wraps the ring twice and then some
  for (let i = 0; i < total; i++) w.add(`id-${i}`, stone(1000, i, i));
  t.equal(w.size, cap, 'full at its bound');
  const first = total - cap;
  t.notOk(w.has(`id-${first - 1}`), 'the newest id past the bound is forgotten');
  t.ok(w.has(`id-${first}`), 'the oldest id inside the bound is kept');
  t.ok(w.has(`id-${total - 1}`), 'the newest is kept');
  t.same(w.get(`id-${first + 5}`), stone(1000, first + 5, first + 5), 'its archive place and times read back');
  t.equal(w.forgottenAccepted, first - 1, 'the forgotten ids\' latest acceptance time is kept');
  const ids = [...w.groups()].flatMap((g) => g.ids);
  t.equal(ids.length, cap, 'the snapshot writes every remembered id once');
  t.equal(ids[0], `id-${first}`, 'oldest first');
  t.equal(ids.at(-1), `id-${total - 1}`);
});

t.test('the age horizon: an id evicted exactly at it stays, one a millisecond older leaves', async (t) => {
  const w = new Tombstones({ ageMs: HOUR, count: 10 });
  w.add('older', stone(1000 - 1));
  w.add('edge', stone(1000));
  w.add('newer', stone(1000 + 1));
  w.prune(1000 + HOUR);
  t.notOk(w.has('older'), 'past the window: forgotten');
  t.ok(w.has('edge'), 'exactly at the horizon: still a duplicate');
  t.ok(w.has('newer'));
  w.prune(1000 + HOUR + 1);
  t.notOk(w.has('edge'), 'a millisecond later it is forgotten');
  t.equal(w.size, 1);
});

t.test('an id added again replaces its entry; long, unicode and colliding-prefix ids are told apart', async (t) => {
  const w = new Tombstones({ ageMs: HOUR, count: 10 });
  const long = `x${'é'.repeat(100)}`; // over a slot's bytes: kept aside
  // Lone surrogates all encode as U+FFFD in UTF-8: kept as strings, so each is its own id and reads back as given.
  const ids = ['a', 'ab', 'ä', 'a\u0000', long, `${long}y`, '6fa459ea-ee8a-3ca4-894e-db77e160355e', 'x\uD800', 'x\uD801', 'x\uFFFD', '😀'];
  ids.forEach((id, i) => w.add(id, stone(10, i)));
  for (const [i, id] of ids.entries()) t.equal(w.get(id)?.offset, i, `${JSON.stringify(id.slice(0, 8))} found`);
  t.notOk(w.has('b'));
  t.notOk(w.has('x\uDC00'), 'another lone surrogate is another id');
  t.same([...w.groups()].flatMap((g) => g.ids), ids, 'the snapshot writes every id as it was given');
  t.notOk(w.has(long.slice(0, -1)), 'a prefix of a long id is another id');
  w.add('a', stone(20, 99));
  t.equal(w.size, ids.length, 'no second entry');
  t.equal(w.get('a')?.offset, 99, 'the latest place wins');
  t.same([...w.groups()].flatMap((g) => g.ids).at(-1), 'a', 'and it moves to the newest end');
  // Everything leaves in order once the horizon passes, the dead entry included.
  w.prune(20 + HOUR + 1);
  t.equal(w.size, 0);
  t.same([...w.groups()], []);
});

t.test('replay after a restart keeps the window: its ids, their order and the results they answer with', async (t) => {
  const dir = tempDir(t);
  const q = { maxDepth: 100_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
  const opts = { retain: { ageMs: HOUR, count: 2 }, evictEveryMs: HOUR };
  const s = await TaskStore.open(dir, q, { fsyncMs: 0 }, opts);
  const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
  await s.submitMany(ids.map((id) => ({ id, prompt: `p ${id}` })));
  for (let r = s.lease({ id: 'w', caps: [] }); r; r = s.lease({ id: 'w', caps: [] })) await s.complete(r.id, { text: `answer ${r.id}`, worker: 'w', attempt: 1 });
  t.equal(await s.evict(), 10);
  await s.compact(); // the window goes into the snapshot
  await s.submitMany([{ id: 'late', prompt: 'p late' }]);
  for (let r = s.lease({ id: 'w', caps: [] }); r; r = s.lease({ id: 'w', caps: [] })) await s.complete(r.id, { text: `answer ${r.id}`, worker: 'w', attempt: 1 });
  t.equal(await s.evict(), 1, 'one more evicted after the snapshot: in the journal\'s tail');
  await s.close();

  const s2 = await TaskStore.open(dir, q, { fsyncMs: 0 }, opts);
  t.teardown(() => s2.close());
  t.equal(s2.retention.remembered_ids, 11, 'snapshot and tail both rebuild the window');
  for (const id of ['r0', 'r9', 'r10']) {
    const [again] = await s2.submitMany([{ id, prompt: `p ${id}` }]);
    t.ok(again!.duplicate, `${id} is still a duplicate`);
    t.equal(again!.record.result?.text, `answer ${id}`, 'answered with its recorded result');
  }
  t.equal(s2.queue.counts().queued, 0, 'nothing came back as work');
});
