import t from 'tap';
import { LineDecoder, MsgpackDecoder, encodeLine, encodeLineWithPayload, encodeMsgpack, type FrameSink } from '../../protocol/index.js';

function sink() {
  const frames: unknown[] = [];
  const errors: string[] = [];
  const s: FrameSink = { frame: (v) => frames.push(v), error: (code) => errors.push(code) };
  return { s, frames, errors };
}

t.test('NDJSON fed one byte at a time gives the same frames', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new LineDecoder(s);
  const msgs = [{ a: 1 }, { b: 'two', c: [1, 2, 3] }, { d: 'ünïcødé 🐝' }];
  const bytes = Buffer.concat(msgs.map(encodeLine));
  for (let i = 0; i < bytes.length; i++) dec.push(bytes.subarray(i, i + 1));
  t.same(frames, msgs);
  t.same(errors, []);
});

t.test('a line built around payload JSON encoded once decodes to the same message as encodeLine', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new LineDecoder(s);
  const payload = { full: false, entries: [{ id: 'a', spec: { id: 'a', prompt: 'ünï "q" \n 🐝' }, seq: 0 }, { id: 'b', result: { worker: 'w-1', attempt: 1, text: '' } }] };
  const env = { ver: 1, id: 'm1', type: 'STATE', src: 'hub', dst: 'w-1' };
  const shared = JSON.stringify(payload);
  dec.push(encodeLineWithPayload(env, shared));
  dec.push(encodeLineWithPayload({ ...env, id: 'm2', dst: 'w-2', re: 'r' }, shared));
  t.same(frames, [{ ...env, payload }, { ...env, id: 'm2', dst: 'w-2', re: 'r', payload }]);
  t.same(errors, []);
  t.same(JSON.parse(encodeLineWithPayload(env, shared).toString()), JSON.parse(encodeLine({ ...env, payload }).toString()));
});

t.test('a multi-byte UTF-8 character split across chunks is decoded whole', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new LineDecoder(s);
  const bytes = encodeLine({ bee: '🐝' });
  const at = bytes.indexOf(0xf0) + 2; // inside the 4-byte sequence
  dec.push(bytes.subarray(0, at));
  dec.push(bytes.subarray(at));
  t.same(frames, [{ bee: '🐝' }]);
  t.same(errors, []);
});

t.test('an oversized line is reported once and dropped; the next line still decodes', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new LineDecoder(s, 1024);
  const big = Buffer.from('x'.repeat(5000));
  for (let i = 0; i < big.length; i += 100) dec.push(big.subarray(i, i + 100)); // over the bound before any newline
  dec.push(Buffer.from('\n'));
  dec.push(encodeLine({ ok: true }));
  dec.push(Buffer.from(`${'y'.repeat(2000)}\n`)); // over the bound within one chunk
  dec.push(encodeLine({ ok: 2 }));
  t.same(errors, ['SWARM_ERR_LINE_TOO_LONG', 'SWARM_ERR_LINE_TOO_LONG']);
  t.same(frames, [{ ok: true }, { ok: 2 }]);
});

t.test('invalid JSON and invalid UTF-8 are errors, blank lines are keep-alives', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new LineDecoder(s);
  dec.push(Buffer.from('{nope\n\n\r\n'));
  dec.push(Buffer.from([0xff, 0xfe, 0x0a]));
  dec.push(Buffer.from('{"x":1}\r\n'));
  t.same(errors, ['SWARM_ERR_BAD_JSON', 'SWARM_ERR_BAD_JSON']);
  t.same(frames, [{ x: 1 }]);
});

t.test('detaching inside the sink (a codec switch) hands over exactly the bytes after that line', async (t) => {
  const got: unknown[] = [];
  let next: MsgpackDecoder | undefined;
  const msgSink: FrameSink = { frame: (v) => got.push(v), error: (c) => t.fail(c) };
  const dec: LineDecoder = new LineDecoder({
    frame: (v) => {
      got.push(v);
      next = new MsgpackDecoder(msgSink);
      next.push(dec.detach());
    },
    error: (c) => t.fail(c),
  });
  // ACK line and two msgpack frames (one with a newline byte inside) in one read.
  dec.push(Buffer.concat([encodeLine({ ack: 1 }), encodeMsgpack({ p: 'a\nb' }), encodeMsgpack({ p: 'c' })]));
  t.same(got, [{ ack: 1 }, { p: 'a\nb' }, { p: 'c' }]);
});

t.test('msgpack frames split at every byte decode; an oversized length kills the stream', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new MsgpackDecoder(s, 1024);
  const bytes = Buffer.concat([encodeMsgpack({ a: 1 }), encodeMsgpack({ s: 'é'.repeat(10) })]);
  for (let i = 0; i < bytes.length; i++) dec.push(bytes.subarray(i, i + 1));
  t.same(frames, [{ a: 1 }, { s: 'é'.repeat(10) }]);
  const head = Buffer.alloc(4); head.writeUInt32BE(4096);
  dec.push(head);
  dec.push(encodeMsgpack({ after: true }));
  t.same(errors, ['SWARM_ERR_LINE_TOO_LONG']);
  t.equal(frames.length, 2, 'nothing decoded after a bad length prefix');
});

t.test('msgpack 64-bit integers decode as numbers; extension types other than undefined are refused', async (t) => {
  const { s, frames, errors } = sink();
  const dec = new MsgpackDecoder(s);
  const frame = (body: number[]) => { const b = Buffer.from(body); const h = Buffer.alloc(4); h.writeUInt32BE(b.length); return Buffer.concat([h, b]); };
  const u64 = (n: bigint) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(n); return [...b]; };
  const i64 = (n: bigint) => { const b = Buffer.alloc(8); b.writeBigInt64BE(n); return [...b]; };
  // {"s": uint64 429, "t": uint64 epoch ms, "n": int64 -5, "u": undefined-extension}
  dec.push(frame([0x84, 0xa1, 0x73, 0xcf, ...u64(429n), 0xa1, 0x74, 0xcf, ...u64(1763800000412n), 0xa1, 0x6e, 0xd3, ...i64(-5n), 0xa1, 0x75, 0xd4, 0x00, 0x00]));
  t.same(frames, [{ s: 429, t: 1763800000412, n: -5 }], 'numbers, and the undefined extension is left out');
  t.equal(typeof (frames[0] as Record<string, unknown>).s, 'number');
  t.notOk('u' in (frames[0] as Record<string, unknown>), 'undefined means absent');
  // A BigInt extension (0x42), a Date (timestamp ext -1), and a structured-clone reference are not protocol values.
  dec.push(frame([0x81, 0xa1, 0x62, 0xd4, 0x42, 0x07]));
  dec.push(frame([0x81, 0xa1, 0x64, 0xd6, 0xff, 0x00, 0x00, 0x00, 0x01]));
  dec.push(frame([0x81, 0xa1, 0x62, 0xc4, 0x01, 0x00]));
  dec.push(frame([0x81, 0xa1, 0x6f, 0xd6, 0x69, 0x00, 0x00, 0x00, 0x01, 0x80]));
  t.same(errors, ['SWARM_ERR_BAD_FRAME', 'SWARM_ERR_BAD_FRAME', 'SWARM_ERR_BAD_FRAME', 'SWARM_ERR_BAD_FRAME'], 'each refused as a bad frame');
  dec.push(encodeMsgpack({ after: [1, 'x', { y: null }] }));
  t.same(frames[1], { after: [1, 'x', { y: null }] }, 'the stream goes on');
});

/**
 * What a stream of bytes must decode to, from the bytes whole (an oracle that shares no code with
 * LineDecoder): each newline-ended line over the bound is one LINE_TOO_LONG, a blank one nothing,
 * else its UTF-8 (a byte-order mark at its start dropped) parsed as JSON, or BAD_JSON. A last line
 * with no newline is one LINE_TOO_LONG if already over the bound, else nothing yet.
 */
function oracle(bytes: Buffer, maxLine: number): string[] {
  const out: string[] = [];
  let start = 0;
  for (;;) {
    const nl = bytes.indexOf(0x0a, start);
    if (nl === -1) { if (bytes.length - start > maxLine) out.push('E:SWARM_ERR_LINE_TOO_LONG'); return out; }
    let line = bytes.subarray(start, nl);
    start = nl + 1;
    if (line.length > maxLine) { out.push('E:SWARM_ERR_LINE_TOO_LONG'); continue; }
    if (line.length && line[line.length - 1] === 0x0d) line = line.subarray(0, -1);
    if (!line.length) continue;
    let text: string;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(line); } catch { out.push('E:SWARM_ERR_BAD_JSON'); continue; }
    try { out.push(`F:${JSON.stringify(JSON.parse(text))}|${text}`); } catch { out.push('E:SWARM_ERR_BAD_JSON'); }
  }
}

t.test('any stream, cut into any chunks, decodes as the whole bytes say (20,000 random cases)', async (t) => {
  let seed = 12345;
  const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) >>> 0; return seed % n; };
  const pieces = [
    () => encodeLine({ id: `t-${rnd(1000)}`, text: 'ünï 🐝 "q"\\n' }), () => Buffer.from('{"a":1}\r\n'), () => Buffer.from('\n'), () => Buffer.from('\r\n'),
    () => Buffer.from('{nope\n'), () => Buffer.from([0xff, 0x7b, 0x7d, 0x0a]), () => Buffer.from('\ufeff{"bom":true}\n'), () => Buffer.from(`{"long":"${'x'.repeat(rnd(300))}"}\n`),
    () => Buffer.from('{"partial":'), () => Buffer.from('🐝'), () => Buffer.from('"}\n'),
  ];
  let bad = 0;
  for (let c = 0; c < 20_000 && bad < 5; c++) {
    const maxLine = [64, 200, 1 << 20][rnd(3)]!;
    // A JSON string line of the bound's length, one less or one more (a CR counts, as any byte).
    const edge = () => Buffer.from(`"${'y'.repeat(Math.min(maxLine, 300) - 3 + rnd(3))}"\n`);
    const all = [...pieces, edge, edge];
    const bytes = Buffer.concat(Array.from({ length: 1 + rnd(12) }, () => all[rnd(all.length)]!()));
    const got: string[] = [];
    const dec = new LineDecoder({ frame: (v, text) => got.push(`F:${JSON.stringify(v)}|${text}`), error: (code) => got.push(`E:${code}`) }, maxLine);
    for (let i = 0; i < bytes.length;) { const n = 1 + rnd([8, 40, 600][rnd(3)]!); dec.push(bytes.subarray(i, i + n)); i += n; }
    const want = oracle(bytes, maxLine);
    if (JSON.stringify(got) !== JSON.stringify(want)) { bad++; t.same(got, want, `case ${c}: ${JSON.stringify(bytes.toString('latin1'))}`); }
  }
  t.equal(bad, 0, 'every case as the oracle says');
});

t.test('detaching on a line among whole lines of valid UTF-8 hands over the rest, and no line after it is delivered', async (t) => {
  for (const cut of [0, 5, 12]) {
    const frames: unknown[] = [];
    let rest: Buffer | undefined;
    const dec: LineDecoder = new LineDecoder({
      frame: (v) => { frames.push(v); if ((v as { ack?: number }).ack) rest = dec.detach(); },
      error: (c) => t.fail(c),
    });
    const bytes = Buffer.from('{"ack":1}\n{"after":2}\n{"x":3}\npart');
    // As a connection does: once detached, what arrives goes to the next decoder (here: appended).
    const feed = (b: Buffer) => { if (rest) rest = Buffer.concat([rest, b]); else dec.push(b); };
    if (cut) { feed(bytes.subarray(0, cut)); feed(bytes.subarray(cut)); } else feed(bytes);
    t.same(frames, [{ ack: 1 }], `cut at ${cut}: only the line before the switch`);
    t.equal(rest?.toString(), '{"after":2}\n{"x":3}\npart', `cut at ${cut}: the bytes after it, exactly`);
  }
});
