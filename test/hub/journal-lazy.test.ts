import t from 'tap';
import { decodeLazy, decodeLine, encodeRecord, type JournalRecord } from '../../hub/journal-record.js';
import { ReplayedTask } from '../../hub/replayed.js';

/** A line as replay sees it: its bytes, the newline after them. */
const bytes = (line: string): { buf: Buffer; end: number } => { const buf = Buffer.from(line, 'utf8'); return { buf, end: buf.length - 1 }; };
const lazy = (r: JournalRecord) => { const { buf, end } = bytes(encodeRecord(r)); const l = decodeLazy(buf, 0, end); return l && { ...l }; };

t.test('task and result lines in the writer\'s form are read without parsing: id and time from their places', async (t) => {
  const task: JournalRecord = { t: 'task', spec: { id: 'a-1', prompt: 'p "q" ä€😀', priority: 2, meta: { id: 'not-this' } }, at: 1_764_000_000_123 };
  const l = lazy(task)!;
  t.same([l.t, l.id, l.at], ['task', 'a-1', 1_764_000_000_123]);
  t.equal(l.buf.toString('utf8', l.start, l.end + 1), encodeRecord(task), 'the line as written, newline included');
  const result: JournalRecord = { t: 'result', id: 'a-1', text: 'r ä', worker: 'w', attempt: 2, receipt: { at: 5 } as never, at: 7 };
  t.same(lazy(result) && [lazy(result)!.t, lazy(result)!.id, lazy(result)!.at], ['result', 'a-1', 7]);
});

t.test('any other line is left to the full parse, which checks and reports it', async (t) => {
  const cases: [string, JournalRecord | string][] = [
    ['the id not first in the spec', { t: 'task', spec: { prompt: 'p', id: 'b', priority: 0 }, at: 1 }],
    ['an id JSON escapes', { t: 'task', spec: { id: 'c"\\', prompt: 'p', priority: 0 }, at: 1 }],
    ['unchecked', { t: 'task', spec: { id: 'd', prompt: 'p', priority: 0 }, at: 1, unchecked: true }],
    ['a negative time', { t: 'result', id: 'e', text: 'x', worker: 'w', attempt: 1, at: -5 }],
    ['a fractional time', { t: 'result', id: 'e', text: 'x', worker: 'w', attempt: 1, at: 5.5 }],
    ['a failure', { t: 'fail', id: 'f', error: { code: 'SWARM_ERR_CANCELLED', msg: 'x' }, attempts: 1, at: 1 }],
    ['no checksum', '{"t":"task","spec":{"id":"g","prompt":"p"},"at":1}\n'],
  ];
  for (const [name, r] of cases) {
    const { buf, end } = bytes(typeof r === 'string' ? r : encodeRecord(r));
    t.equal(decodeLazy(buf, 0, end), undefined, name);
    if (typeof r !== 'string') t.ok(decodeLine(buf, 0, end).ok, `${name}: parsed in full`);
  }
  const good = encodeRecord({ t: 'result', id: 'h', text: 'answer', worker: 'w', attempt: 1, at: 9 });
  for (const [name, bad] of [['a flipped byte', good.replace('answer', 'answeR')], ['a length that does not match', good.replace('"_n":', '"_n":1')]] as const) {
    const { buf, end } = bytes(bad);
    t.equal(decodeLazy(buf, 0, end), undefined, `${name}: not read lazily`);
    t.notOk(decodeLine(buf, 0, end).ok, `${name}: damage for the full parse`);
  }
});

t.test('a replayed task parses its lines when first read, as the full parse would', async (t) => {
  const spec = { id: 'k', prompt: 'p ä', priority: 0, max_tokens: 9 };
  const tl = bytes(encodeRecord({ t: 'task', spec, at: 3 }));
  const rl = bytes(encodeRecord({ t: 'result', id: 'k', text: 'r', worker: 'w', attempt: 1, at: 4 }));
  const rec = new ReplayedTask('k', 3, { buf: tl.buf, start: 0, end: tl.end });
  rec.resultLine = { buf: rl.buf, start: 0, end: rl.end };
  t.ok(rec.taskLine && rec.resultLine, 'unparsed until read');
  t.same(rec.spec, spec);
  t.same(rec.result, { text: 'r', worker: 'w', attempt: 1, receipt: undefined });
  t.equal(rec.taskLine, undefined, 'parsed once, the line let go');
  t.same(JSON.parse(JSON.stringify(rec)).spec, spec, 'JSON sees the parsed fields');
});
