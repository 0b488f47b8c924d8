import t from 'tap';
import { Replica, type Entry } from '../../worker/gossip/replica.js';
import { seededRandom, pick } from '../../worker/gossip/clock.js';

const spec = (id: string) => ({ id, prompt: `p ${id}` });

t.test('merging the same deltas in any order gives the same state, once per task', async (t) => {
  const a = new Replica();
  a.addTasks([spec('t1'), spec('t2')]);
  const deltas: Entry[] = [
    ...a.addTasks([]),
    { id: 't1', spec: spec('t1'), seq: 0 },
    { id: 't2', spec: spec('t2'), seq: 1 },
    { id: 't1', lease: { worker: 'w-2', attempt: 1, epoch: 1, until: 10 } },
    { id: 't1', lease: { worker: 'w-2', attempt: 1, epoch: 1, until: 10, revoked: true } },
    { id: 't1', lease: { worker: 'w-3', attempt: 2, epoch: 2, until: 20 } },
    { id: 't1', result: { worker: 'w-3', attempt: 2, text: 'late' } },
    { id: 't1', result: { worker: 'w-2', attempt: 1, text: 'early' } },
    { id: 't2', failure: { worker: 'w-1', attempt: 3, error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' } } },
    { id: 't2', result: { worker: 'w-9', attempt: 3, text: 'ok' } },
  ];
  const rand = seededRandom(42);
  const states: string[] = [];
  for (let trial = 0; trial < 20; trial++) {
    const r = new Replica();
    const order = pick(deltas, deltas.length, rand);
    for (const d of order) r.merge(d);
    const again = order.filter((d) => r.merge(d)).length;
    if (again !== 0) t.fail(`a second merge changed ${again} entries`);
    states.push(JSON.stringify(r.ids().map((id) => [r.get(id)!.result, r.get(id)!.lease, r.state(id)])));
  }
  t.equal(new Set(states).size, 1, 'all orders agree');
  const r = new Replica();
  for (const d of deltas) r.merge(d);
  t.equal(r.get('t1')!.result!.text, 'early', 'lowest (attempt, worker) wins');
  t.equal(r.state('t2'), 'done', 'a result beats a final failure');
  t.equal(r.finalCount, 2);
});

t.test('digest and diff find exactly what differs, in both directions', async (t) => {
  const a = new Replica();
  const b = new Replica();
  const specs = Array.from({ length: 250 }, (_, i) => spec(`t-${i}`));
  a.addTasks(specs);
  b.addTasks(specs.slice(0, 200));
  a.record('t-5', { worker: 'w-1', attempt: 1, text: 'x' });
  b.record('t-7', { worker: 'w-2', attempt: 1, text: 'y' });
  // Sync both ways using chunked digests (50 ids per chunk) and bounded entry chunks.
  for (const c of a.digest(50)) {
    const { send, want } = b.diff(c);
    for (const ch of b.chunk(send, 1000)) { t.ok(ch.length >= 1); for (const e of ch) a.merge(e); }
    for (const ch of a.chunk(want, 1000)) for (const e of ch) b.merge(e);
  }
  t.equal(b.size, 250);
  t.same(a.digest(1000), b.digest(1000), 'replicas equal after one exchange');
  t.equal(a.get('t-7')!.result!.text, 'y');
  t.equal(b.get('t-5')!.result!.text, 'x');
});

t.test('a lease cannot be taken on a finished task, and attempts count up', async (t) => {
  const r = new Replica();
  r.addTasks([spec('a')]);
  t.equal(r.lease('a', 'w-1', 1, 100)!.lease!.attempt, 1);
  r.revoke('a');
  t.equal(r.state('a'), 'queued');
  t.equal(r.lease('a', 'w-2', 1, 100)!.lease!.attempt, 2);
  r.record('a', { worker: 'w-2', attempt: 2, text: 'ok' });
  t.equal(r.lease('a', 'w-3', 1, 100), undefined);
  t.equal(r.record('a', { worker: 'w-3', attempt: 3, text: 'dup' }), undefined, 'a later result loses');
});

t.test('bucket summaries: equal replicas agree on every bucket; a sync round touches only differing buckets', async (t) => {
  const a = new Replica();
  const b = new Replica();
  const specs = Array.from({ length: 3000 }, (_, i) => spec(`t-${i}`));
  a.addTasks(specs);
  b.addTasks(specs);
  for (let i = 0; i < 3000; i++) { const o = { worker: 'w-1', attempt: 1, text: `r${i}` }; a.record(`t-${i}`, o); b.record(`t-${i}`, o); }
  t.same(a.differingBuckets(b.buckets()), [], 'the same entries, merged in the same order: every bucket equal');
  // Different histories that end in the same state agree too (the summary is order-free).
  const c = new Replica();
  for (let i = 2999; i >= 0; i--) { c.merge({ id: `t-${i}`, spec: spec(`t-${i}`), seq: i }); c.record(`t-${i}`, { worker: 'w-1', attempt: 1, text: `r${i}` }); }
  t.same(c.differingBuckets(a.buckets()), [], 'merged in reverse order: still equal');

  a.record('t-5', { worker: 'w-0', attempt: 1, text: 'better' }); // a lower worker id wins
  b.addTasks([spec('new-1')]);
  const diff = b.differingBuckets(a.buckets());
  t.ok(diff.length >= 1 && diff.length <= 2, `only the touched buckets differ (${diff.length})`);
  // b answers with the detail of those buckets; a sends what b lacks and asks for what it lacks.
  const groups = b.bucketDigest(diff);
  t.ok(groups.reduce((n, g) => n + g.d.length, 0) < 100, 'the detail covers a few buckets, not 3000 entries');
  for (const g of groups) {
    const { send, want } = a.diffBuckets(g.bs, g.d);
    for (const id of send) b.merge(a.get(id)!);
    for (const id of want) a.merge(b.get(id)!);
  }
  t.same(a.differingBuckets(b.buckets()), [], 'equal after one round');
  t.equal(b.get('t-5')!.result!.text, 'better');
  t.ok(a.get('new-1'), 'a got the task only b had');
});

t.test('fingerprints read after every merge and read once at the end agree', async (t) => {
  const rand = seededRandom(7);
  const deltas: Entry[] = [];
  for (let i = 0; i < 500; i++) {
    deltas.push({ id: `t-${i}`, spec: spec(`t-${i}`), seq: i });
    deltas.push({ id: `t-${i}`, lease: { worker: `w-${i % 7}`, attempt: 1, epoch: 0, until: 10 } });
    if (i % 3) deltas.push({ id: `t-${i}`, result: { worker: `w-${i % 7}`, attempt: 1, text: `r${i}` } });
  }
  const eager = new Replica();
  const lazy = new Replica();
  for (const d of pick(deltas, deltas.length, rand)) {
    eager.merge(d);
    eager.buckets(); // read at every step: each merge is fingerprinted before the next
    lazy.merge(d);
  }
  t.same(lazy.buckets(), eager.buckets(), 'every bucket sum agrees');
  t.same(lazy.digest(100), eager.digest(100), 'every entry hash agrees');
  t.same(lazy.diff(eager.digest(100)[0]!), { send: [], want: [] }, 'nothing to exchange');
});

t.test('listeners hear once per task that it became final; open ids and counts follow every order', async (t) => {
  const rand = seededRandom(11);
  const deltas: Entry[] = [];
  for (let i = 0; i < 200; i++) {
    deltas.push({ id: `t-${i}`, spec: spec(`t-${i}`), seq: i });
    deltas.push({ id: `t-${i}`, lease: { worker: `w-${i % 5}`, attempt: 1, epoch: 0, until: 10 } });
    if (i % 4 === 0) deltas.push({ id: `t-${i}`, result: { worker: `w-${i % 5}`, attempt: 1, text: `r${i}` } });
    if (i % 4 === 1) deltas.push({ id: `t-${i}`, result: { worker: 'w-9', attempt: 2, text: 'b' } }, { id: `t-${i}`, result: { worker: 'w-1', attempt: 1, text: 'a' } });
    if (i % 4 === 2) deltas.push({ id: `t-${i}`, failure: { worker: 'w-1', attempt: 1, error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' } } });
  }
  for (let round = 0; round < 5; round++) {
    const r = new Replica();
    // Odd rounds read the open ids first, so the set is kept merge by merge; even rounds build it at the end.
    if (round % 2) t.same(r.openIds(), []);
    const became: string[] = [];
    r.onChange((e, _d, becameFinal) => { if (becameFinal) { t.ok(e.result || e.failure); became.push(e.id); } });
    for (const d of pick(deltas, deltas.length, rand)) r.merge(d);
    for (const d of deltas) r.merge(d); // again: nothing new becomes final
    t.equal(new Set(became).size, became.length, 'each task once');
    t.equal(became.length, 150);
    t.equal(r.finalCount, 150);
    t.same(r.openIds(), Array.from({ length: 50 }, (_, k) => `t-${4 * k + 3}`), 'open: the tasks not final, in submission order');
    t.same([...r.openEntries()].map((e) => e.id).sort(), r.openIds().sort(), 'open entries: the same tasks');
    t.same(r.counts(), { queued: 0, leased: 50, done: 100, failed: 50 });
  }
});

t.test('fingerprints stay right when many merges of a few ids come before a digest', async (t) => {
  const eager = new Replica();
  const lazy = new Replica();
  for (let n = 0; n < 3000; n++) {
    const id = `t-${n % 3}`;
    const d: Entry = { id, lease: { worker: 'w-1', attempt: 1, epoch: n, until: n } };
    eager.merge(d); eager.buckets();
    lazy.merge(d);
  }
  t.same(lazy.buckets(), eager.buckets());
  t.same(lazy.digest(), eager.digest());
});
