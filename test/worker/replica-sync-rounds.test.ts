import t, { type Test } from 'tap';
import { ManualClock, seededRandom } from '../../worker/gossip/clock.js';
import { BUCKETS, Replica, type Entry } from '../../worker/gossip/replica.js';
import { ReplicaSync } from '../../worker/gossip/replica-sync.js';
import type { Membership } from '../../worker/gossip/membership.js';
import { PrevReplicaSync } from '../fixtures/replica-sync-prev.js';

/**
 * Anti-entropy rounds between members that take in the whole state (holders, the acting coordinator):
 * a round compares sub-buckets before naming ids, so what it details follows what differs; one round
 * at a time; a catch-up larger than one answer goes in rounds; and a member of the build before (a
 * rolling restart) still converges with this build, both ways. Counted: messages' pairs and entries,
 * and every member's final entries.
 */

interface Sent { from: string; to: string; at: number; body: { op: string; d?: unknown[]; e?: Entry[]; ids?: string[]; h?: unknown[]; r?: number; cut?: number } }

/** Members on an in-memory mesh: each message is delivered `latencyMs` later on the manual clock. */
function mesh(ids: string[], clock: ManualClock, latencyMs = 5): { ms: Membership[]; sent: Sent[] } {
  const handlers = new Map<string, (from: string, body: unknown) => void>();
  const sent: Sent[] = [];
  const ms = ids.map((id) => ({
    id,
    live: () => [...ids],
    isLive: () => true,
    broadcast: () => {},
    onBroadcast: () => {},
    onApp: (_ch: string, fn: (from: string, body: unknown) => void) => { handlers.set(id, fn); },
    sendApp: (to: string, _ch: string, body: unknown) => {
      const m: Sent = { from: id, to, at: clock.now(), body: structuredClone(body) as Sent['body'] };
      sent.push(m);
      clock.setTimeout(() => handlers.get(to)?.(m.from, structuredClone(m.body)), latencyMs);
      return true;
    },
  }) as unknown as Membership);
  return { ms, sent };
}

const spec = (id: string, seq: number, pad = '') => ({ id, prompt: `p ${id}${pad}` });
const done = (id: string, seq: number, worker = 'x', pad = ''): Entry => ({ id, seq, spec: spec(id, seq, pad), result: { worker, attempt: 1, text: `r ${id}${pad}` } });

/** JSON with keys sorted: entries merged in another order hold their fields in another order. */
const canon = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x));

/** Every member holds the same entries, field for field. */
function sameEntries(t: Test, rs: Replica[], what: string): void {
  const ids = new Set<string>();
  for (const r of rs) for (const id of r.ids()) ids.add(id);
  let differ = 0, missing = 0;
  for (const id of ids) {
    const first = canon(rs[0]!.get(id) ?? null);
    for (const r of rs.slice(1)) { const e = r.get(id); if (!e) missing++; else if (canon(e) !== first) differ++; }
    if (first === 'null') missing++;
  }
  t.same({ missing, differ }, { missing: 0, differ: 0 }, `${what}: every member holds the same ${ids.size} entries`);
  t.ok(rs.every((r) => JSON.stringify(r.buckets()) === JSON.stringify(rs[0]!.buckets())), `${what}: and the same bucket values`);
}

const pairsIn = (sent: Sent[]) => sent.reduce((n, m) => n + (m.body.d?.length ?? 0), 0);

/** Two holders of `base` entries; `b` has `changes` more (new tasks, results over leases), spread over many buckets. */
function twoHolders(base: number, changes: number): { a: Replica; b: Replica } {
  const a = new Replica(), b = new Replica();
  for (let i = 0; i < base; i++) { const e = done(`h${i}`, i); a.merge(e); b.merge(e); }
  for (let i = 0; i < changes; i++) {
    const id = `n${i}`;
    const lease = { id, seq: base + i, spec: spec(id, base + i), lease: { worker: 'w', attempt: 1, epoch: 1, until: 1e15 } };
    a.merge(lease);
    b.merge({ ...lease, result: { worker: 'w', attempt: 1, text: `r ${id}` } });
  }
  return { a, b };
}

t.test('a round details the sub-buckets that differ, not whole buckets: pairs follow what differs', async (t) => {
  const BASE = 20_000, CHANGES = 40;
  const counts: Record<string, number> = {};
  for (const build of ['this', 'before'] as const) {
    const clock = new ManualClock();
    const { ms, sent } = mesh(['a', 'b'], clock);
    const { a, b } = twoHolders(BASE, CHANGES);
    const differ = a.differingBuckets(b.buckets()).length;
    const Sync = build === 'this' ? ReplicaSync : PrevReplicaSync;
    const sa = new Sync(a, ms[0]!, { clock });
    new Sync(b, ms[1]!, { clock });
    sa.syncWith('b');
    clock.run(1000, 5);
    sameEntries(t, [a, b], `${build}: ${CHANGES} changes in ${differ} buckets of ${BUCKETS}`);
    counts[build] = pairsIn(sent);
  }
  // A bucket holds about 78 entries here, a sub-bucket about 2.
  t.ok(counts.this! <= CHANGES * 8, `this build: ${counts.this} (id, hash) pairs for ${CHANGES} changes`);
  t.ok(counts.before! >= CHANGES * 40, `the build before: ${counts.before} (whole buckets)`);
});

t.test('one round at a time: a timer tick while the last round is unanswered begins none', async (t) => {
  const clock = new ManualClock();
  // Slower than the sync interval: an answer arrives 1.8 intervals after its question.
  const { ms, sent } = mesh(['a', 'b'], clock, 900);
  const { a, b } = twoHolders(2000, 20);
  const sa = new ReplicaSync(a, ms[0]!, { clock, syncIntervalMs: 1000, rand: seededRandom(1) });
  new ReplicaSync(b, ms[1]!, { clock, syncIntervalMs: 1000, rand: seededRandom(2), quiet: true });
  sa.start();
  clock.run(20_000, 50);
  const opens = sent.filter((m) => m.from === 'a' && m.body.op === 'bk');
  // A round is 2 or 4 messages of 0.9 s (bk, ss; then sd, se while they differ), begun on the next
  // tick after: about one each 2 s; a round a tick would be 20.
  t.ok(opens.length >= 3 && opens.length <= 11, `${opens.length} rounds begun in 20 s at one tick a second, ${sa.stats.roundsHeld} ticks held`);
  t.ok(sa.stats.roundsHeld >= 8, 'the ticks in between began none');
  // Each round began after the last one's end (its `se`, or an `ss` naming no bucket) had arrived.
  const ends = sent.filter((m) => m.from === 'b' && (m.body.op === 'se' || (m.body.op === 'ss' && (m.body.h?.length ?? 0) === 0)));
  const late = opens.slice(1).filter((o) => !ends.some((e) => e.body.r === o.body.r! - 1 && e.at + 900 <= o.at));
  t.equal(late.length, 0, 'no round began before the last was answered');
  sameEntries(t, [a, b], 'after them');
  sa.stop();
});

t.test('a catch-up larger than one answer goes in several rounds, each begun once the last is taken in', async (t) => {
  const clock = new ManualClock();
  const { ms, sent } = mesh(['a', 'b'], clock, 5);
  const a = new Replica(), b = new Replica();
  // About 12 MB in 3,000 entries of 4 KB: three answers of 4 MB at most.
  const pad = 'y'.repeat(2000);
  for (let i = 0; i < 3000; i++) b.merge(done(`t${i}`, i, 'x', pad));
  const sa = new ReplicaSync(a, ms[0]!, { clock });
  new ReplicaSync(b, ms[1]!, { clock });
  sa.syncWith('b');
  clock.run(2000, 5);
  sameEntries(t, [a, b], 'the catch-up');
  // Bytes of entries sent by b between two of its `se`s: one answer.
  let bytes = 0, most = 0, answers = 0, cut = 0;
  for (const m of sent) {
    if (m.from !== 'b') continue;
    if (m.body.op === 'en') bytes += JSON.stringify(m.body.e).length;
    if (m.body.op === 'se') { most = Math.max(most, bytes); bytes = 0; answers++; if (m.body.cut) cut++; }
  }
  t.ok(answers >= 3 && cut === answers - 1, `${answers} answers, ${cut} of them cut`);
  t.ok(most <= 4.5 * 2 ** 20, `the largest answer: ${(most / 2 ** 20).toFixed(1)} MB of entries`);
});

t.test('members of this build and of the build before converge, whichever begins a round', async (t) => {
  const rand = seededRandom(7);
  const clock = new ManualClock();
  const ids = ['m0', 'm1', 'm2', 'm3', 'm4', 'm5'];
  const { ms, sent } = mesh(ids, clock, 20);
  const rs = ids.map(() => new Replica());
  // A shared history, then each member's own view: tasks only it saw, leases and results that race
  // (the merge picks one winner, whatever the order).
  for (let i = 0; i < 3000; i++) { const e = done(`h${i}`, i); for (const r of rs) r.merge(e); }
  for (let i = 0; i < 400; i++) {
    const id = `t${i}`;
    const holders = rs.filter(() => rand() < 0.5);
    for (const r of holders) {
      const worker = `w${Math.floor(rand() * 4)}`;
      const base = { id, seq: 3000 + i, spec: spec(id, 3000 + i) };
      const roll = rand();
      if (roll < 0.3) r.merge({ ...base, lease: { worker, attempt: 1 + Math.floor(rand() * 3), epoch: 1 + Math.floor(rand() * 2), until: 1e15 } });
      else if (roll < 0.8) r.merge({ ...base, result: { worker, attempt: 1 + Math.floor(rand() * 2), text: `r ${id} ${worker}` } });
      else r.merge(base);
    }
  }
  // Every other member runs the build before; all take in the whole state (holders).
  const syncs = ids.map((id, i) => {
    const o = { clock, rand: seededRandom(100 + i), syncIntervalMs: 1000 };
    return i % 2 ? new PrevReplicaSync(rs[i]!, ms[i]!, o) : new ReplicaSync(rs[i]!, ms[i]!, o);
  });
  for (const s of syncs) s.start();
  const converged = () => rs.every((r) => JSON.stringify(r.buckets()) === JSON.stringify(rs[0]!.buckets()));
  let ms_ = 0;
  while (!converged() && ms_ < 60_000) { clock.advance(100); ms_ += 100; }
  for (const s of syncs) s.stop();
  t.ok(converged(), `converged in ${ms_} simulated ms`);
  sameEntries(t, rs, 'three members of each build');
  const ops = new Set(sent.map((m) => `${ids.indexOf(m.from) % 2 ? 'before' : 'this'}:${m.body.op}`));
  t.ok(ops.has('this:sd') && ops.has('before:bd') && ops.has('this:bd'), `both kinds of round ran (${[...ops].sort().join(' ')})`);
});

t.test('a round answered by a member that holds no replica costs what it holds: its entries are asked for, none sent', async (t) => {
  const clock = new ManualClock();
  const { ms, sent } = mesh(['c', 'm'], clock);
  const c = new Replica(), m = new Replica();
  for (let i = 0; i < 20_000; i++) c.merge(done(`h${i}`, i));
  for (let i = 0; i < 5; i++) m.merge(done(`own${i}`, 30_000 + i, 'm'));
  const sc = new ReplicaSync(c, ms[0]!, { clock });
  new ReplicaSync(m, ms[1]!, { clock, holder: false, leader: () => 'c' });
  sc.syncWith('m');
  clock.run(1000, 5);
  for (let i = 0; i < 5; i++) t.ok(c.get(`own${i}`), `own${i} reached the round's initiator`);
  t.equal(m.size, 5, 'the member took in nothing');
  t.equal(sc.stats.sent.entries, 0, 'no entry sent to it');
  t.ok(sc.stats.sent.ids <= 5, `it asked for ${sc.stats.sent.ids} ids`);
  t.ok(sent.some((x) => x.from === 'm' && x.body.op === 'bd'), 'it answered with its own pairs');
});
