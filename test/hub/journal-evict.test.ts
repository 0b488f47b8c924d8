import t from 'tap';
import { decodeLine, encodeLine, encodeRecord, type JournalRecord } from '../../hub/journal-record.js';
import { decodeLazyEvict } from '../../hub/journal-evict.js';
import { Evictor } from '../../hub/archive-evict.js';

type Evict = Extract<JournalRecord, { t: 'evict' }>;

/** A line as replay sees it: its bytes (the newline excluded from the range). */
const bytes = (line: string): { buf: Buffer; end: number } => { const buf = Buffer.from(line, 'utf8'); return { buf, end: buf.length - 1 }; };

/** The lazy form read back as the record the full parse gives (ids made from their bytes). */
function lazyAsRecord(line: string): Evict | undefined {
  const { buf, end } = bytes(line);
  const l = decodeLazyEvict(buf, 0, end);
  if (!l) return undefined;
  const ids = Array.from({ length: l.count }, (_, i) => l.buf.toString('utf8', l.idStart[i], l.idEnd[i]));
  return { t: 'evict', ids, file: l.file, offsets: Array.from(l.offsets.subarray(0, l.count)), at: l.at, ...(l.end !== undefined ? { end: l.end } : {}), ...(l.floor !== undefined ? { floor: l.floor } : {}) };
}

t.test('evict lines in the writer\'s form are read without parsing: the same ids, offsets, file, time, end and floor as the full parse', async (t) => {
  const many = Array.from({ length: 3000 }, (_, i) => `t-${i}`);
  const records: Evict[] = [
    { t: 'evict', ids: ['a', 'b-2'], file: 3, offsets: [0, 475], at: 1_764_000_000_123 },
    { t: 'evict', ids: ['x'], file: 1, offsets: [9], at: 5, end: 950 },
    { t: 'evict', ids: [], file: 7, offsets: [], at: 6, end: 12_345, floor: 1_764_000_000_000 },
    { t: 'evict', ids: ['ä€😀', '', 'y'.repeat(300), 'id with spaces'], file: 2, offsets: [1, 2, 3, 4], at: 0 },
    { t: 'evict', ids: many, file: 12, offsets: many.map((_, i) => i * 475), at: 77 },
  ];
  for (const r of records) {
    const line = encodeRecord(r);
    const full = decodeLine(bytes(line).buf, 0, bytes(line).end);
    t.ok(full.ok, 'the full parse reads it');
    t.same(lazyAsRecord(line), full.ok ? full.rec : undefined, `${r.ids.length} ids: read alike`);
  }
});

t.test('any other evict line is left to the full parse, which checks and reports it', async (t) => {
  const cases: [string, string][] = [
    ['an id JSON escapes', encodeRecord({ t: 'evict', ids: ['a"b'], file: 1, offsets: [0], at: 1 })],
    ['a backslash', encodeRecord({ t: 'evict', ids: ['a\\b'], file: 1, offsets: [0], at: 1 })],
    ['a lone surrogate (escaped)', encodeRecord({ t: 'evict', ids: ['a\ud800'], file: 1, offsets: [0], at: 1 })],
    ['another key order', encodeLine({ t: 'evict', file: 1, ids: ['a'], offsets: [0], at: 1 })],
    ['an unknown key', encodeLine({ t: 'evict', ids: ['a'], file: 1, offsets: [0], at: 1, more: 2 })],
    ['a negative offset', encodeRecord({ t: 'evict', ids: ['a'], file: 1, offsets: [-1], at: 1 })],
    ['a fractional time', encodeRecord({ t: 'evict', ids: ['a'], file: 1, offsets: [0], at: 1.5 })],
    ['an exponent', encodeRecord({ t: 'evict', ids: ['a'], file: 1, offsets: [1e21], at: 1 })],
    ['fewer offsets than ids', encodeLine({ t: 'evict', ids: ['a', 'b'], file: 1, offsets: [0], at: 1 })],
    ['more offsets than ids', encodeLine({ t: 'evict', ids: ['a'], file: 1, offsets: [0, 1], at: 1 })],
    ['an id not a string', encodeLine({ t: 'evict', ids: [5], file: 1, offsets: [0], at: 1 })],
    ['no checksum', '{"t":"evict","ids":["a"],"file":1,"offsets":[0],"at":1}\n'],
  ];
  for (const [name, line] of cases) t.equal(lazyAsRecord(line), undefined, name);
  const good = encodeRecord({ t: 'evict', ids: ['abc', 'def'], file: 1, offsets: [0, 5], at: 9 });
  for (const [name, bad] of [['a flipped byte', good.replace('abc', 'abC')], ['a length that does not match', good.replace('"_n":', '"_n":1')]] as const) {
    const { buf, end } = bytes(bad);
    t.equal(decodeLazyEvict(buf, 0, end), undefined, `${name}: not read lazily`);
    t.notOk(decodeLine(buf, 0, end).ok, `${name}: damage for the full parse`);
  }
});

t.test('the duplicate window replayed from evict lines\' bytes holds what the parsed replay holds: ids, places, order, the oldest forgotten past its bound', async (t) => {
  const host = { get: () => undefined, remove: () => false, busy: () => false, evicted: () => {} };
  const opts = { ageMs: 3600_000, count: 100_000 };
  const parsed = new Evictor(opts, host);
  const lazy = new Evictor(opts, host);
  const cap = parsed.tombstones.cap;
  // Past the bound, with ids of every kind, some evicted twice (a task resubmitted after its window).
  const odd = ['ä-1', 'x'.repeat(41), 'x'.repeat(40), '', 'q-€', 'dup-1'];
  const records: Evict[] = [];
  for (let b = 0, n = 0; n < cap + 25_000; b++) {
    const ids = Array.from({ length: 5000 }, (_, k) => `t-${n + k}`);
    if (b % 7 === 0) ids.push(...odd, `t-${Math.max(0, n - 3)}`);
    records.push({ t: 'evict', ids, file: 1 + (b >> 3), offsets: ids.map((_, k) => k * 100), at: 1000 + b, ...(b % 5 === 0 ? { end: b * 10 } : {}) });
    n += 5000;
  }
  for (const r of records) {
    const { buf, end } = bytes(encodeRecord(r));
    parsed.replay(r, false);
    const l = decodeLazyEvict(buf, 0, end);
    if (!l) { t.fail('not read lazily'); return; }
    lazy.replayLazy(l, false);
  }
  t.equal(lazy.tombstones.size, parsed.tombstones.size, 'as many ids');
  t.ok(lazy.tombstones.size > cap - 100 && lazy.tombstones.size <= cap, 'the window is at its bound (an id evicted twice leaves a dead slot)');
  t.notOk(lazy.tombstones.has('t-1'), 'past it, the oldest are forgotten');
  const groups = (e: Evictor) => [...e.snapshot()].map((r) => (r.t === 'evict' && r.ids.length ? r : { ...r, at: 0 }));
  t.same(groups(lazy), groups(parsed), 'the same evict records for a snapshot: ids, places, times, order, covered end');
  for (const id of [...odd, 't-0', `t-${cap + 24_999}`, 'never']) {
    t.equal(lazy.tombstones.has(id), parsed.tombstones.has(id), `has ${id.slice(0, 12)}`);
    t.same(lazy.tombstones.get(id), parsed.tombstones.get(id), `its place: ${id.slice(0, 12)}`);
  }
});
