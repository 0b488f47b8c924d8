import t from 'tap';
import { LineDecoder, MsgpackDecoder, encodeLine, encodeLineWithPayload, encodeMsgpack, type FrameSink } from '../protocol/index.js';

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
