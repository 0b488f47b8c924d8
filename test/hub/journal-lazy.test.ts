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

t.test('the in-place CRC-32 replay checks lines with equals zlib\'s over the line and its closing brace', async (t) => {
  const { crc32 } = await import('node:zlib');
  const { crc32Range } = await import('../../hub/crc32-range.js');
  const buf = Buffer.alloc(4096);
  let x = 12345;
  for (let i = 0; i < buf.length; i++) { x = (x * 1103515245 + 12345) >>> 0; buf[i] = x >>> 24; }
  let bad = 0;
  // Every length from 0 to 40 (both loops, each remainder of 8) at several offsets, and long ranges.
  for (const start of [0, 1, 3, 7, 100]) {
    for (const len of [...Array.from({ length: 41 }, (_, i) => i), 150, 1000, 3900]) {
      const want = crc32(Buffer.from('}'), crc32(buf.subarray(start, start + len))) >>> 0;
      if (crc32Range(buf, start, start + len, 0x7d) !== want) bad++;
    }
  }
  t.equal(bad, 0, 'every range agrees');
});

t.test('a replayed result is read for its worker and attempt without its text, which parses when read, as the full parse would', async (t) => {
  const texts = ['', 'plain', 'q "x" ä€😀', 'ends in a backslash \\', '","worker":"evil","attempt":9', 'a\\","worker":"x', '\n\t\u0000 }', 'x'.repeat(70_000)];
  const receipts = [undefined, { at: 5, sig: 'abc', worker: 'not-this' }];
  let n = 0;
  for (const text of texts) for (const receipt of receipts) {
    const r: JournalRecord = { t: 'result', id: `id-${n++}`, text, worker: 'w-7', attempt: 3, ...(receipt ? { receipt: receipt as never } : {}), at: 11 };
    const rl = bytes(encodeRecord(r));
    const full = decodeLine(rl.buf, 0, rl.end);
    t.ok(full.ok, 'the full parse reads it', { diagnostic: false });
    const want = full.ok ? { text: (full.rec as { text: string }).text, worker: 'w-7', attempt: 3, receipt } : undefined;
    const rec = new ReplayedTask(r.id, 1, { buf: rl.buf, start: 0, end: rl.end });
    rec.resultLine = { buf: rl.buf, start: 0, end: rl.end };
    const res = rec.result!;
    t.ok(Object.getOwnPropertyDescriptor(res, 'text')?.get, 'its text is not parsed yet', { diagnostic: false });
    t.equal(res.worker, 'w-7', 'worker read', { diagnostic: false });
    t.equal(res.attempt, 3, 'attempt read', { diagnostic: false });
    t.same({ ...res }, want, `spread of ${JSON.stringify(text).slice(0, 40)}`);
    t.equal(JSON.stringify(rec.result), JSON.stringify(want), 'JSON of it as of the full parse', { diagnostic: false });
  }
  const rl = bytes(encodeRecord({ t: 'result', id: 'm', text: 'old', worker: 'w', attempt: 1, at: 2 }));
  const rec = new ReplayedTask('m', 1, { buf: rl.buf, start: 0, end: rl.end });
  rec.resultLine = { buf: rl.buf, start: 0, end: rl.end };
  rec.result!.text = 'new';
  t.equal(rec.result!.text, 'new', 'its text can be set before it is read');
  t.same(Object.keys(rec.result!), ['text', 'worker', 'attempt', 'receipt'], 'keys in the full parse\'s order');
});
