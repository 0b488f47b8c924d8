import t from 'tap';
import { Replica } from '../../worker/gossip/replica.js';
import { ReplicaSync } from '../../worker/gossip/replica-sync.js';
import type { Membership } from '../../worker/gossip/membership.js';

/**
 * After a failover every member pushes what only it holds to the acting coordinator, which holds the
 * whole state. Answering each push used to detail every bucket of the coordinator's replica (a pass
 * over it and a frame of every id it holds, per pusher): 24 pushers stalled its process for seconds.
 * Counted here: the (id, hash) pairs and entries the coordinator sends while taking in a push, which
 * follow what the pusher holds, not the coordinator's history; and the pushed entries arrive.
 */

interface Sent { from: string; to: string; body: { op: string; d?: unknown[]; bs?: number[]; e?: unknown[]; ids?: string[] } }

/** Two members on a queued in-memory link: just what ReplicaSync uses of a Membership. */
function pair(ids: [string, string]): { ms: Membership[]; sent: Sent[]; drain: () => number } {
  const handlers = new Map<string, (from: string, body: unknown) => void>();
  const queue: Sent[] = [];
  const sent: Sent[] = [];
  const ms = ids.map((id) => ({
    id,
    live: () => [...ids],
    isLive: () => true,
    broadcast: () => {},
    onBroadcast: () => {},
    onApp: (_ch: string, fn: (from: string, body: unknown) => void) => { handlers.set(id, fn); },
    sendApp: (to: string, _ch: string, body: unknown) => { const m = { from: id, to, body: structuredClone(body) as Sent['body'] }; sent.push(m); queue.push(m); return true; },
  }) as unknown as Membership);
  const drain = (): number => { let n = 0; for (let m = queue.shift(); m && n < 10_000; m = queue.shift(), n++) handlers.get(m.to)!(m.from, m.body); return n; };
  return { ms, sent, drain };
}

const spec = (id: string, seq: number) => ({ id, prompt: `p ${id}`, seq });

t.test('a push to the coordinator costs what the pusher holds, not the coordinator\'s history', async (t) => {
  const HISTORY = 20_000;
  const { ms, sent, drain } = pair(['c', 'm']);
  const coord = new Replica();
  const member = new Replica();
  for (let i = 0; i < HISTORY; i++) coord.merge({ id: `h${i}`, seq: i, spec: spec(`h${i}`, i), result: { worker: 'x', attempt: 1, text: 'ok' } });
  // The member's own: 3 results the coordinator lacks, 2 it has alike, 1 newer here (a result over a lease).
  for (let i = 0; i < 3; i++) member.merge({ id: `own${i}`, seq: HISTORY + i, spec: spec(`own${i}`, HISTORY + i), result: { worker: 'm', attempt: 1, text: `r${i}` } });
  for (const id of ['h1', 'h2']) member.merge(coord.get(id)!);
  coord.merge({ id: 'run', seq: HISTORY + 9, spec: spec('run', HISTORY + 9), lease: { worker: 'm', attempt: 1, epoch: 1, until: 1e15 } });
  member.merge({ ...coord.get('run')!, result: { worker: 'm', attempt: 1, text: 'done' } });
  // The coordinator takes in the whole state (a holder); the member holds only its own.
  new ReplicaSync(coord, ms[0]!, { leader: () => 'c' });
  const ps = new ReplicaSync(member, ms[1]!, { leader: () => 'c', holder: false });
  ps.pushTo('c');
  t.ok(drain() > 0, 'the push ran');

  for (let i = 0; i < 3; i++) t.equal(coord.get(`own${i}`)?.result?.text, `r${i}`, `own${i} reached the coordinator`);
  t.equal(coord.get('run')?.result?.text, 'done', 'the newer entry reached the coordinator');
  const fromCoord = sent.filter((m) => m.from === 'c');
  const pairs = fromCoord.reduce((n, m) => n + (m.body.d?.length ?? 0) + (m.body.e?.length ?? 0), 0);
  const askedFor = fromCoord.reduce((n, m) => n + (m.body.ids?.length ?? 0), 0);
  t.equal(pairs, 0, `the coordinator sent no pairs or entries of its ${HISTORY} (sent ${fromCoord.map((m) => m.body.op).join(',')})`);
  t.ok(askedFor <= member.size, `it asked for ${askedFor} ids, at most what the member holds (${member.size})`);
  const fromMember = sent.filter((m) => m.from === 'm');
  t.ok(fromMember.reduce((n, m) => n + (m.body.d?.length ?? 0), 0) <= member.size, 'the member detailed only its own entries');
  t.equal(member.size, 6, 'a push takes nothing back');
});

t.test('a push to a member that takes in nothing is answered as before, with its own detail', async (t) => {
  const { ms, sent, drain } = pair(['c', 'm']);
  const other = new Replica();
  const member = new Replica();
  other.merge({ id: 'a', seq: 0, spec: spec('a', 0), result: { worker: 'c', attempt: 1, text: 'x' } });
  member.merge({ id: 'b', seq: 1, spec: spec('b', 1), result: { worker: 'm', attempt: 1, text: 'y' } });
  // Neither holds a replica, and neither is the leader in its own view.
  new ReplicaSync(other, ms[0]!, { leader: () => 'z', holder: false });
  const ps = new ReplicaSync(member, ms[1]!, { leader: () => 'z', holder: false });
  ps.pushTo('c');
  drain();
  t.notOk(other.get('b'), 'a member that holds no replica takes in no other member\'s task');
  t.ok(sent.some((m) => m.from === 'c' && m.body.op === 'bd'), 'it answered with its bucket detail, marked as holding none');
});

t.test('a push from a build that cannot detail its side (no `pd` in its `bk`) is answered with the whole detail, as before', async (t) => {
  const { ms, sent, drain } = pair(['c', 'm']);
  const coord = new Replica();
  const member = new Replica();
  for (let i = 0; i < 50; i++) coord.merge({ id: `h${i}`, seq: i, spec: spec(`h${i}`, i), result: { worker: 'x', attempt: 1, text: 'ok' } });
  member.merge({ id: 'own', seq: 60, spec: spec('own', 60), result: { worker: 'm', attempt: 1, text: 'mine' } });
  new ReplicaSync(coord, ms[0]!, { leader: () => 'c' });
  new ReplicaSync(member, ms[1]!, { leader: () => 'c', holder: false });
  // What such a member sends: its buckets, marked as a push, and nothing else.
  ms[1]!.sendApp('c', 'rs', { op: 'bk', b: member.buckets(), push: true });
  drain();
  t.notOk(sent.some((m) => m.from === 'c' && m.body.op === 'pb'), 'no `pb`, which that build would ignore');
  t.ok(sent.some((m) => m.from === 'c' && m.body.op === 'bd'), 'the bucket detail, as before');
  t.equal(coord.get('own')?.result?.text, 'mine', 'its result reached the coordinator');
});
