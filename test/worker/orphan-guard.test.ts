import t from 'tap';
import { OrphanGuard } from '../../worker/orphan.js';

/** The orphan bound on driven time: it fires only after the bound with no parent, no hub and no peer, without a break. */

function rig(afterMs: number) {
  let now = 0;
  const s = { parent: true, hub: false, peers: false, peersOrphaned: false };
  const why: string[] = [];
  const said: [boolean, number][] = [];
  const g = new OrphanGuard({ hubLinked: () => s.hub, peersLive: () => s.peers, peersOrphaned: () => s.peersOrphaned, announce: (o, ms) => said.push([o, ms]) }, {
    afterMs, parentAlive: () => s.parent, now: () => now, every: () => () => {}, onOrphaned: (w) => why.push(w),
  });
  return { s, why, said, g, at: (ms: number) => { now = ms; g.check(); } };
}

t.test('a worker with a live parent waits for its hub as long as it takes', async (t) => {
  const r = rig(1000);
  for (let ms = 0; ms <= 100_000; ms += 500) r.at(ms);
  t.same(r.why, [], 'never fires while the parent lives');
});

t.test('no parent, no hub, no peer for the bound: it fires once, saying why', async (t) => {
  const r = rig(1000);
  r.s.parent = false;
  r.at(0); r.at(999);
  t.same(r.why, [], 'not before the bound');
  r.at(1000);
  t.equal(r.why.length, 1, 'at the bound');
  t.match(r.why[0], /parent process is gone.*no hub.*no failover peer/);
  r.at(5000);
  t.equal(r.why.length, 1, 'once');
});

t.test('a hub link or a live peer resets the clock: a member riding out an outage is never cut', async (t) => {
  const r = rig(1000);
  r.s.parent = false;
  r.s.peers = true;
  for (let ms = 0; ms <= 60_000; ms += 500) r.at(ms);
  t.same(r.why, [], 'peers in sight: never');
  r.s.peers = false;
  r.at(60_500);
  r.s.hub = true;
  r.at(61_200);
  r.s.hub = false;
  r.at(61_400); r.at(62_300);
  t.same(r.why, [], 'the hub came back in between: the clock restarted');
  r.at(62_400);
  t.equal(r.why.length, 1, 'a full bound after the last break');
});

t.test('a bound of 0 turns it off', async (t) => {
  const r = rig(0);
  r.s.parent = false;
  r.g.start();
  t.same(r.why, []);
});

t.test('peers that all say they are orphaned too do not keep it; one that is not does, and it says which it is', async (t) => {
  const r = rig(1000);
  r.s.parent = false;
  r.s.peers = true;
  r.s.peersOrphaned = true;
  r.at(0); r.at(600);
  t.same(r.said, [[true, 0], [true, 600]], 'it announces that it is orphaned, and for how long');
  r.s.peersOrphaned = false;
  r.at(900);
  r.s.peersOrphaned = true;
  r.at(1000); r.at(1800);
  t.same(r.why, [], 'one peer not orphaned in between: the clock restarted');
  r.at(2000);
  t.equal(r.why.length, 1, 'a full bound with every peer orphaned: it fires');
  t.match(r.why[0], /every failover peer it saw in another process was orphaned too/);
  const k = rig(1000);
  k.s.peers = true;
  k.s.peersOrphaned = true;
  for (let ms = 0; ms <= 10_000; ms += 500) k.at(ms);
  t.same(k.why, [], 'its own parent alive: never');
  t.ok(k.said.every(([o]) => !o), 'and it says it is not orphaned');
});
