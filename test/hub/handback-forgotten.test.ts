import t from 'tap';
import { TaskStore } from '../../hub/store.js';
import { screenHandback } from '../../hub/handback-check.js';
import { hubKey, hubSignSpec, hubSignSpecAt } from '../../protocol/result-mac.js';
import { tempDir } from '../helpers/cli.js';

/**
 * A task evicted so long ago that the hub forgot its id (past the duplicate window) cannot come back
 * as new work through a handback: the hub signed its acceptance time into the spec's MAC, and it is
 * older than what the hub still remembers. A task the hub never journaled (a lost tail) still can.
 */

const TOKEN = 'handback-forgotten-token-0123456789';
const hk = hubKey(TOKEN);
const q = { maxDepth: 1_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const j = { fsyncMs: 0 };
const retain = { retain: { ageMs: 1_000, count: 1_000 }, evictEveryMs: 3600_000 };

t.test('an evicted and forgotten task handed back is refused; a later unknown one is taken', async (t) => {
  const dir = tempDir(t);
  let s = await TaskStore.open(dir, q, j, retain);
  await s.submitMany([{ id: 'old-1', prompt: 'p' }]);
  const acceptedAt = s.queue.get('old-1')!.submittedAt;
  const spec = s.queue.get('old-1')!.spec;
  const lease = s.lease({ id: 'w', caps: [] });
  t.equal(lease?.id, 'old-1');
  t.equal(await s.complete('old-1', { text: 'ran once', worker: 'w', attempt: 1 }), 'recorded');
  const now = Date.now();
  t.equal(await s.evict(now + 5_000), 1, 'evicted past the age horizon');
  t.ok(s.knows('old-1'), 'inside the duplicate window the id is remembered');
  await s.evict(now + 20_000);
  t.notOk(s.knows('old-1'), 'past the window the id is forgotten');
  t.ok(s.acceptedFloor >= acceptedAt, 'the floor covers the forgotten task');

  const ctx = () => ({ token: TOKEN, get: (id: string) => s.queue.get(id), live: () => false, acceptedFloor: s.acceptedFloor });
  const stale = { id: 'old-1', spec, spec_mac: hubSignSpecAt(hk, spec, acceptedAt), seq: 1 };
  const r1 = screenHandback([stale], ctx());
  t.equal(r1.accept.length, 0, 'the stale entry is not taken');
  t.match(r1.refused[0]?.why, /evicted after its duplicate window/);

  const lostSpec = { id: 'lost-1', prompt: 'accepted after every record the journal kept', priority: 0 };
  const lost = { id: 'lost-1', spec: lostSpec, spec_mac: hubSignSpecAt(hk, lostSpec, now + 60_000), seq: 2 };
  t.equal(screenHandback([lost], ctx()).accept.length, 1, 'an unknown task accepted after the floor is taken back');
  const legacy = { id: 'old-1', spec, spec_mac: hubSignSpec(hk, spec), seq: 1 };
  t.equal(screenHandback([legacy], ctx()).accept.length, 1, 'a MAC without a time is judged as before');
  const forged = { ...stale, spec_mac: hubSignSpecAt(hk, spec, now + 60_000).replace(/^sh2\.\d+/, `sh2.${now + 60_000 + 1}`) };
  t.match(screenHandback([forged], ctx()).refused[0]?.why, /no valid MAC/, 'the time cannot be changed without the hub key');

  // The floor outlives a restart, also once the snapshot no longer holds the task or its tombstone.
  await s.compact();
  await s.close();
  s = await TaskStore.open(dir, q, j, retain);
  t.teardown(() => s.close());
  t.notOk(s.knows('old-1'));
  t.ok(s.acceptedFloor >= acceptedAt, 'the floor is read back after a restart');
  t.equal(screenHandback([stale], ctx()).accept.length, 0, 'and the stale entry is still refused');
  t.equal(screenHandback([lost], ctx()).accept.length, 1);
});
