import t from 'tap';
import { IdRing } from '../../protocol/id-ring.js';

t.test('a set in insertion order: the bound drops the oldest, a deleted id leaves its slot dead until the oldest reaches it', async (t) => {
  const r = new IdRing(4);
  t.equal(r.bytes, 0, 'nothing allocated before the first id');
  for (const id of ['a', 'b', 'c', 'd']) r.push(id);
  t.ok(r.bytes > 0, 'allocated at the bound with the first');
  const bytes = r.bytes;
  t.ok(r.full);
  t.ok(r.delete('b'));
  t.notOk(r.delete('b'), 'once');
  t.equal(r.size, 3);
  t.equal(r.slotsUsed, 4, 'its slot is kept, dead');
  r.push('e'); // full: the oldest slot ('a') goes
  t.notOk(r.has('a'));
  r.push('f'); // the next oldest is the dead one: no id lost
  t.same([...r.slots()].map((i) => r.idAt(i)), ['c', 'd', 'e', 'f'], 'oldest first');
  for (let i = 0; i < 1000; i++) r.push(`x${i}`);
  t.same([...r.slots()].map((i) => r.idAt(i)), ['x996', 'x997', 'x998', 'x999'], 'across many wrap-arounds');
  t.equal(r.bytes, bytes, 'no growth');
  while (r.dropOldest());
  t.equal(r.size, 0);
  t.equal(r.oldest(), -1);
});

t.test('made resident part-filled, it keeps what it holds; long and unicode ids are exact', async (t) => {
  const r = new IdRing(1000, 100);
  const long = `y${'é'.repeat(50)}`;
  const ids = [long, '😀', 'x\uD800', ...Array.from({ length: 300 }, (_, i) => `6fa459ea-ee8a-3ca4-894e-${String(i).padStart(12, '0')}`)];
  for (const id of ids) r.push(id);
  t.ok(ids.every((id) => r.has(id)), 'every id found after the pages were written through');
  t.same([...r.slots()].map((i) => r.idAt(i)), ids, 'and read back as given');
  t.notOk(r.has(long.slice(0, -1)));
  t.notOk(r.has('x\uDC00'));
});
