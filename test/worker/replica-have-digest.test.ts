import t from 'tap';
import { Replica } from '../../worker/gossip/replica.js';

/**
 * A holder's HANDSHAKE digest of what it holds: cached until its copy changes (a worker reconnecting
 * to a hub that is down asks at every try), and without the tasks it was told to leave out (those
 * that became final while no hub was linked).
 */

const finished = (r: Replica, from: number, n: number) => {
  for (let i = from; i < from + n; i++) r.merge({ id: `d-${i}`, spec: { id: `d-${i}`, prompt: `p ${i}` }, seq: i, result: { worker: 'w1', attempt: 1, text: `r ${i}` } });
};

t.test('the digest is cached until the copy changes, and leaves out what it is told to', async (t) => {
  const a = new Replica();
  const b = new Replica();
  finished(a, 0, 300);
  finished(b, 0, 300);
  const first = a.have();
  t.equal(a.have(), first, 'asked again with nothing changed: the same digest, not computed again');
  t.same(a.have(), b.have(), 'two copies of the same tasks: the same digest');

  // Finished while no hub was linked: left out, the digest is that of the copy before them (as many buckets: the count of finals picks them).
  finished(a, 300, 20);
  const off = new Set(Array.from({ length: 20 }, (_, i) => `d-${300 + i}`));
  t.notSame(a.have(), b.have(), 'the copy changed: a new digest');
  t.same(a.have(off), b.have(), 'without the tasks finished off the hub: the digest of the copy before them');
  off.clear();
  t.same(a.have(off), a.have(), 'the set emptied: every task counts again');

  // A drop (an eviction) changes the copy too.
  const before = a.have();
  a.forget(['d-0']);
  t.notSame(a.have(), before, 'an eviction: a new digest');
});

t.test('the digest is keyed on what is left out, not on how many: a set of the same size with other ids is a new digest', async (t) => {
  const a = new Replica();
  const b = new Replica();
  finished(a, 0, 300);
  finished(b, 0, 300);
  const off = new Set(['d-1', 'd-2']);
  const first = a.have(off);
  off.delete('d-2');
  off.add('d-3');
  t.notSame(a.have(off), first, 'same size, other contents: computed again');
  b.forget(['d-1', 'd-3']);
  t.same(a.have(off), b.have(), 'the digest of the copy without those two');
});

t.test('the anchors of a cut sync are cached until the copy changes', async (t) => {
  const a = new Replica();
  finished(a, 0, 100);
  const first = a.anchors(40, 60);
  t.same(first, { last: 'd-40', next: 'd-60' });
  t.equal(a.anchors(40, 60), first, 'asked again: the same answer, not a pass over the copy');
  t.same(a.anchors(50), { last: 'd-50' }, 'another position: computed for it');
  a.forget(['d-40']);
  t.same(a.anchors(40, 60), { last: 'd-39', next: 'd-60' }, 'the copy changed: computed again');
});

t.test('per-id comparison: the ids the copy lacks or holds otherwise, and those it holds that were not named', async (t) => {
  const { haveBucketOf, haveOf } = await import('../../protocol/replica-have.js');
  const a = new Replica();
  finished(a, 0, 400);
  const n = 64;
  const buckets = [3, 17];
  const mine = (id: string) => haveOf(id, 3, 'w1', 1, n).x;
  const ids: string[] = [];
  const h: number[] = [];
  for (let i = 0; i < 420; i++) {
    const id = `d-${i}`;
    if (!buckets.includes(haveBucketOf(id, n))) continue;
    if (i % 5 === 0) continue; // not named: the copy's is extra
    ids.push(id);
    h.push(i % 7 === 0 ? (mine(id) ^ 1) >>> 0 : mine(id)); // another outcome at the hub
  }
  const { want, extra } = a.compareIds(n, buckets, ids, h);
  const expectWant = ids.filter((id) => { const i = Number(id.slice(2)); return i >= 400 || i % 7 === 0; });
  t.same(want.sort(), expectWant.sort(), 'wanted: those it lacks and those with another fingerprint');
  const expectExtra = Array.from({ length: 400 }, (_, i) => `d-${i}`).filter((id, i) => buckets.includes(haveBucketOf(id, n)) && i % 5 === 0);
  t.same(extra.sort(), expectExtra.sort(), 'extra: those of the buckets the hub did not name');
  const held = ids.find((id) => !expectWant.includes(id))!;
  t.ok(a.compareIds(n, buckets, ids, h, new Set([held])).want.includes(held), 'a task left out of the digest is wanted');
});
