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
