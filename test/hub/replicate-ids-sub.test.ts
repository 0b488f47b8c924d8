import t from 'tap';
import pino from 'pino';
import type { Payload } from '../../protocol/index.js';
import { Replica } from '../../worker/gossip/replica.js';
import { heldBy } from '../../hub/replicate-held.js';
import { IdExchange, IdsMemos } from '../../hub/replicate-ids.js';
import { Versions } from '../../hub/replicate-resume.js';
import type { TaskRecord } from '../../hub/task.js';

/**
 * A restarted hub compares a holder's copy after a gossip period: a few thousand of its 100,000
 * finished tasks differ (finished while the hub was away, lost, evicted meanwhile), spread over about
 * a third of the digest's buckets. Naming every task of those buckets named tens of thousands of ids
 * to each holder; a holder that answers sub-bucket values (HANDSHAKE `sync.sub`) has only the tasks
 * of the sub-buckets that differ named. Counts, not timings: the same copy and state each way, and
 * each way the same verdict on every task.
 */

const N = 100_000;
const log = pino({ level: 'silent' });

function record(i: number): TaskRecord {
  return { id: `t-${i}`, seq: i, state: 'done', attempts: 1, result: { worker: 'w-3', attempt: 1, text: `r ${i}` } } as unknown as TaskRecord;
}

/** A hub's finished tasks and a holder's copy of them: `lost` the copy lacks, `other` it holds with another outcome, `extra` only it holds (the hub evicted them). */
function scene(lost: number, other: number, extra: number) {
  const records = Array.from({ length: N }, (_, i) => record(i));
  const replica = new Replica();
  const lostIds = new Set<string>(), otherIds = new Set<string>();
  // Spread over the order as a gossip period's are: every so many tasks.
  const step = Math.floor(N / (lost + other));
  for (let i = 0, k = 0; i < N; i++) {
    const id = `t-${i}`;
    if (i % step === 3 && k < lost + other) { if (k++ < lost) { lostIds.add(id); continue; } otherIds.add(id); }
    const worker = otherIds.has(id) ? 'w-9' : 'w-3';
    replica.merge({ id, spec: { id, prompt: `p ${i}` }, seq: i, result: { worker, attempt: 1, text: `r ${i}` } });
  }
  for (let i = 0; i < extra; i++) replica.merge({ id: `gone-${i}`, spec: { id: `gone-${i}`, prompt: 'p' }, seq: N + i, result: { worker: 'w-3', attempt: 1, text: 'r' } });
  return { records, replica, lostIds, otherIds };
}

/** One per-id comparison between the hub side and the holder's copy, each frame answered as worker/hub-copy.ts does. */
async function exchange(s: ReturnType<typeof scene>, sub: boolean) {
  const versions = new Versions();
  const have = s.replica.have();
  const base = heldBy({ have, all: s.records, versions })!;
  let seq = 0;
  const extras: string[] = [];
  let x: IdExchange;
  const link = {
    send(p: Payload<'SYNC_IDS'>): string {
      const id = `f-${seq++}`;
      const answer: Payload<'SYNC_WANT'> = p.k !== undefined
        ? { want: [], extra: [], differ: s.replica.differingSubs(p.n, p.k, p.buckets, p.sums!) }
        : s.replica.compareIds(p.n, p.buckets, p.ids, p.h);
      // The JSON round trip a frame takes: what the hub sends must be what the schema carries.
      const back = JSON.parse(JSON.stringify(answer)) as Payload<'SYNC_WANT'>;
      setImmediate(() => x.answer(id, back));
      return id;
    },
    writable: true,
    drained: async () => {},
    isClosed: false,
  };
  x = new IdExchange(link, have, base, new IdsMemos().of('w-1', have.n), versions, { maxChars: 256 * 1024, sub, log }, (ids) => extras.push(...ids));
  const held = await x.run(() => s.records);
  return { base, held: held!, stats: x.stats, extras };
}

t.test('after a gossip period: sub-bucket values first name a fraction of the ids, with the same verdict on every task', async (t) => {
  const LOST = 1500, OTHER = 300, EXTRA = 700;
  const s = scene(LOST, OTHER, EXTRA);
  const whole = await exchange(s, false);
  const subs = await exchange(s, true);
  const differ = whole.base.differing.length;
  t.ok(differ > 1000 && differ < whole.base.buckets, `buckets that differ: ${differ} of ${whole.base.buckets}`);
  t.equal(whole.stats.sums, 0, 'a holder that predates sub-bucket values gets ids only');
  t.ok(subs.stats.sums > 0, `sub-bucket values sent first: ${subs.stats.sums}`);
  const changed = LOST + OTHER + EXTRA;
  t.ok(whole.stats.pairs > 10 * changed, `whole buckets: ${whole.stats.pairs} ids named for ${changed} tasks that differ`);
  t.ok(subs.stats.pairs < 3 * changed, `sub-buckets: ${subs.stats.pairs} ids named for ${changed} tasks that differ`);
  t.ok(subs.stats.pairs * 5 < whole.stats.pairs, `${whole.stats.pairs} -> ${subs.stats.pairs} ids named`);

  // The same verdict either way: held is exactly what the copy holds as the hub does.
  const wrong = { whole: 0, subs: 0 };
  for (const r of s.records) {
    const holds = !s.lostIds.has(r.id) && !s.otherIds.has(r.id);
    if (whole.held.held(r) !== holds) wrong.whole++;
    if (subs.held.held(r) !== holds) wrong.subs++;
  }
  t.same(wrong, { whole: 0, subs: 0 }, 'every task held, lacking or held otherwise as it is');
  t.equal(subs.stats.want, LOST + OTHER, 'the holder asks for exactly what it lacks or holds otherwise');
  t.same(new Set(subs.extras), new Set(whole.extras), 'the tasks only the holder holds come back either way');
  t.equal(subs.extras.length, EXTRA, 'each of them');
});

t.test('a bucket of few tasks is named at once: no round of sub-bucket values for it', async (t) => {
  const replica = new Replica();
  const records = Array.from({ length: 100 }, (_, i) => record(i));
  for (let i = 0; i < 100; i++) if (i % 10) replica.merge({ id: `t-${i}`, spec: { id: `t-${i}`, prompt: 'p' }, seq: i, result: { worker: 'w-3', attempt: 1, text: 'r' } });
  const r = await exchange({ records, replica, lostIds: new Set(), otherIds: new Set() }, true);
  t.equal(r.stats.sums, 0, 'about 6 tasks a bucket: ids named at once');
  t.equal(r.stats.want, 10, 'the 10 tasks the copy lacks');
});
