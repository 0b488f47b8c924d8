import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TaskStore } from '../../hub/index.js';
import { COMPACT_STEPS } from '../../hub/journal.js';
import { Checker, journalResults, type FinalTask } from '../helpers/checker.js';
import { startHub } from '../helpers/inproc.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { hotAndArchived, runJournalChild, toldByChild } from '../helpers/journal-child.js';

const opts = { maxDepth: 1_000_000, leaseMs: 60_000, defaultMaxAttempts: 3 };
const w = { id: 'w', caps: [] as string[] };

function tmp(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-journal-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A journal with tasks a…f, results for a, b, c. */
async function seed(dir: string): Promise<void> {
  const s = await TaskStore.open(dir, opts, { fsyncMs: 0 });
  await s.submitMany(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => ({ id, prompt: `p-${id}` })));
  for (const id of ['a', 'b', 'c']) { s.lease(w); await s.complete(id, { text: `done-${id}`, worker: 'w', attempt: 1 }); }
  await s.close();
}

const state = (s: TaskStore): FinalTask[] => [...s.queue.all()].map((r) => ({ id: r.id, state: r.state, text: r.result?.text }));

t.test('journal damage: each damaged record is quarantined and reported, every intact record kept, the store always opens', async (t) => {
  const damages: [string, (lines: string[]) => string[], (s: TaskStore) => void][] = [
    ['a garbage line', (l) => [...l.slice(0, 3), 'garbage \u0000 not json', ...l.slice(3)], (s) => t.equal(s.queue.counts().done, 3)],
    ['wrong-shaped JSON {"t":"task"}', (l) => [...l, '{"t":"task"}', '{"t":"result","id":"d"}', '{"t":"task","spec":{"id":"x","promt":"typo"},"at":1}'], (s) => { t.equal(s.queue.get('d')!.state, 'queued', 'a result without text is not served'); t.notOk(s.queue.has('x')); }],
    ['flipped bytes in a result that stay valid JSON', (l) => l.map((x) => (x.includes('"done-b"') ? x.replace('done-b', 'done-X') : x)), (s) => t.equal(s.queue.get('b')!.state, 'queued', 'the changed result is not served; b runs again')],
    ['a truncated journal (torn last line)', (l) => [...l.slice(0, -1), l.at(-1)!.slice(0, 20)], (s) => t.equal(s.queue.get('c')!.state, 'queued', 'the torn result is dropped')],
  ];
  for (const [name, damage, extra] of damages) {
    await t.test(name, async (t) => {
      const dir = tmp(t);
      await seed(dir);
      const file = path.join(dir, 'journal.ndjson');
      const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
      const torn = name.includes('torn');
      const damaged = damage(lines);
      fs.writeFileSync(file, damaged.join('\n') + (torn ? '' : '\n'));
      const s = await TaskStore.open(dir, opts, { fsyncMs: 0 });
      t.ok(s.damage.records >= 1, `reported: ${s.damage.records} damaged (${s.damage.samples.map((x) => x.why).join('; ')})`);
      const q = fs.readFileSync(path.join(dir, 'journal.quarantine.ndjson'), 'utf8').trim().split('\n');
      t.equal(q.length, s.damage.records, 'each damaged record is in the quarantine file');
      for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) t.ok(s.queue.has(id), `task ${id} kept`);
      extra(s);
      const before = state(s);
      await s.close();
      const again = await TaskStore.open(dir, opts, { fsyncMs: 0 });
      t.equal(again.damage.records, 0, 'the damage left the journal (compacted away), the quarantine keeps it');
      t.same(state(again), before, 'the same state after a second open');
      await again.close();
    });
  }
});

t.test('a damaged result line, then a failover worker joins: the hub keeps running and syncs it', async (t) => {
  const dir = tmp(t);
  await seed(dir);
  fs.appendFileSync(path.join(dir, 'journal.ndjson'), '{"t":"result","id":"e","worker":"w","attempt":1,"at":1}\n');
  const { hub, addr, stop } = await startHub({ stateDir: dir });
  t.teardown(stop);
  t.equal(hub.store.damage.records, 1, 'the damaged line is reported');
  const rw = await RawWorker.connect(addr);
  t.teardown(() => rw.sock.destroy());
  const ack = await rw.handshake({ worker_id: 'f-1', slots: 1, peer_addr: '127.0.0.1:9' });
  t.equal(ack?.type, 'HANDSHAKE_ACK', 'the failover worker joins');
  const st = await rw.next((f) => f.type === 'STATE' && f.payload?.full === true, 10_000);
  t.ok(st, 'the joining worker got a full STATE');
  t.equal(hub.store.queue.get('e')!.state, 'queued', 'the damaged result was not served');
  t.equal(hub.store.queue.counts().done, 3);
});

t.test('compaction by size: the journal stays bounded and a reopen gives the same state', async (t) => {
  const dir = tmp(t);
  const s = await TaskStore.open(dir, opts, { fsyncMs: 0, compactBytes: 8192 });
  for (let i = 0; i < 300; i += 10) {
    const ids = Array.from({ length: 10 }, (_, k) => `c-${i + k}`);
    await s.submitMany(ids.map((id) => ({ id, prompt: `p ${id}` })));
    for (let k = 0; k < 7; k++) { const r = s.lease(w)!; await s.complete(r.id, { text: `r ${r.id}`, worker: 'w', attempt: 1 }); }
  }
  await s.compact();
  const stats = s.journalStats!;
  t.ok(stats.compactions >= 2, `${stats.compactions} compactions`);
  t.ok(fs.statSync(path.join(dir, 'journal.ndjson')).size < 8192 * 2, 'the live segment stays small');
  t.notOk(fs.existsSync(path.join(dir, 'journal.old.ndjson')), 'no frozen segment left');
  const before = state(s);
  await s.close();
  const again = await TaskStore.open(dir, opts, { fsyncMs: 0 });
  t.teardown(() => again.close());
  t.same(state(again), before, 'same tasks, same order, same results');
  t.same([...journalResults(dir).values()].filter((n) => n > 1), [], 'one result record per task');
});

t.test('kill -9 at every compaction step loses nothing and duplicates nothing', async (t) => {
  for (const step of COMPACT_STEPS) {
    await t.test(`killed after "${step}"`, async (t) => {
      const dir = tmp(t);
      const r = await runJournalChild(dir, step, 400);
      t.equal(r.signal, 'SIGKILL', 'the child died at that step');
      const check = new Checker();
      toldByChild(check, r.out);
      t.ok(check.counts.accepted > 0, `${check.counts.accepted} acknowledged before the kill`);
      const s = await TaskStore.open(dir, opts, { fsyncMs: 0 });
      const final = state(s);
      t.equal(s.damage.records, 0, 'no damage from a kill');
      const v = check.check(final, { expect: (id) => `r ${id}`, resultRecords: journalResults(dir) });
      t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed, unexpected: v.unexpected }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0 }, v.details.join('; '));
      await s.close();
      // And the journal is still usable: a full run on top of it finishes.
      const r2 = await runJournalChild(dir, '', 0);
      t.ok(r2.out.includes('end'), 'a later process opens it and carries on');
    });
  }
});

t.test('kill -9 at random points while tasks are written, evicted and compacted: each restart loses, duplicates and changes nothing', async (t) => {
  const dir = tmp(t);
  const check = new Checker();
  let next = 0;
  const rounds = 8;
  for (let round = 0; round < rounds; round++) {
    // Up to a second after the first acknowledgement: inside a write, an eviction or one of the
    // compactions a 4 KiB segment bound starts every few batches, wherever it falls.
    const r = await runJournalChild(dir, '', 'forever', [String(next), '40'], Math.floor(Math.random() * 1000));
    t.equal(r.signal, 'SIGKILL', `round ${round}: killed`);
    // A kill inside a write can leave its last line torn (the kernel copies page by page): that is
    // set aside as such, never acknowledged; anything else would be damage the kill made.
    const found = /^open (\d+) ?(.*)$/m.exec(r.out);
    t.ok(found && (found[1] === '0' || found[2]!.split('|').every((why) => /torn last line/.test(why))), `round ${round}: the restart found no damage but a torn last line (${found?.[0]})`);
    const nums = toldByChild(check, r.out);
    next = Math.max(next, ...nums.map((n) => n + 10)) + 10;
    // (A round killed before its first batch leaves nothing told; the next one goes on.)
  }
  t.ok(check.counts.accepted > 100, `${check.counts.accepted} acknowledged over ${rounds} kills`);
  const s = await TaskStore.open(dir, opts, { fsyncMs: 0 }, { retain: { ageMs: 3600_000, count: 40 }, evictEveryMs: 3600_000 });
  t.teardown(() => s.close());
  t.ok(s.damage.samples.every((d) => /torn last line/.test(d.why)), 'no damage from the kills but a torn last line');
  // Every task is hot or archived, once; the archive's lines are counted with the hot results.
  const { final, records } = hotAndArchived(dir, s);
  t.ok(final.length > final.filter((f) => s.queue.has(f.id)).length, 'some tasks were evicted to the archive');
  const v = check.check(final, { expect: (id) => `r ${id}`, resultRecords: records });
  t.same({ lost: v.lost, duplicated: v.duplicated, changed: v.changed, unexpected: v.unexpected }, { lost: 0, duplicated: 0, changed: 0, unexpected: 0 }, v.details.join('; '));
});
