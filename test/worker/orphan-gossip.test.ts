import t from 'tap';
import { OrphanBoard } from '../../worker/orphan-gossip.js';
import { cluster, runUntil } from '../helpers/membership-sim.js';

/**
 * Orphan status gossip on driven time: four SWIM members in three "processes" (two agents share the
 * first). Each process's board announces through its agents' memberships and reads what the others said.
 */

const TTL = 5000;

function rig() {
  const c = cluster(4, 7);
  const [m0, m1, m2, m3] = c.nodes as [typeof c.nodes[0], typeof c.nodes[0], typeof c.nodes[0], typeof c.nodes[0]];
  const pool = (...ms: typeof c.nodes) => ({ agents: ms.map((membership) => ({ client: {}, failover: { node: { membership } } })) });
  const now = () => c.clock.now();
  const boards = [new OrphanBoard(pool(m0, m1), TTL, now), new OrphanBoard(pool(m2), TTL, now), new OrphanBoard(pool(m3), TTL, now)] as const;
  for (const b of boards) b.peers(); // listening from the start
  const sees = (i: number) => boards[i]!.allOrphaned(boards[i]!.peers());
  return { c, boards, sees };
}

t.test('processes that all say they are orphaned see each other so; one that says it is not, or falls silent, keeps the others', async (t) => {
  const { c, boards, sees } = rig();
  t.same(boards[0].peers().sort(), ['w-002', 'w-003'], 'a process\'s peers are the members of the other processes');
  t.notOk(sees(0), 'nothing heard yet: not orphaned (a peer that says nothing keeps it)');
  const say = (o: [boolean, boolean, boolean]) => boards.forEach((b, i) => b.announce(o[i]!, 0));
  say([true, true, true]);
  t.ok(runUntil(c.clock, () => sees(0) && sees(1) && sees(2), 3000) !== undefined, 'every process hears every other say it is orphaned');
  say([true, true, false]);
  t.ok(runUntil(c.clock, () => !sees(0) && !sees(1), 3000) !== undefined, 'one says it is not (a parent, a hub): the others are kept');
  t.ok(sees(2), 'it sees the others orphaned, but its own parent keeps it (the guard reads that)');
  say([true, true, true]);
  t.ok(runUntil(c.clock, () => sees(0), 3000) !== undefined, 'it is orphaned again: so it says');
  // Process 2 falls silent (an older build, or announcements lost): what it said lapses.
  let silent = 0;
  const lapsed = runUntil(c.clock, () => { if (c.clock.now() - silent >= 1000) { silent = c.clock.now(); boards[0].announce(true, 0); boards[1].announce(true, 0); } return !sees(0); }, 3 * TTL, 100);
  t.ok(lapsed !== undefined, `a peer that has said nothing for ${TTL} ms no longer counts as orphaned`);
  for (const m of c.nodes) m.stop();
});
