import t from 'tap';
import { OrphanGuard } from '../../worker/orphan.js';

/** The orphan bound on driven time: it fires only after the bound with no parent, no hub and no peer, without a break. */

function rig(afterMs: number) {
  let now = 0;
  const s = { parent: true, hub: false, peers: false };
  const why: string[] = [];
  const g = new OrphanGuard({ hubLinked: () => s.hub, peersLive: () => s.peers }, {
    afterMs, parentAlive: () => s.parent, now: () => now, every: () => () => {}, onOrphaned: (w) => why.push(w),
  });
  return { s, why, g, at: (ms: number) => { now = ms; g.check(); } };
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
