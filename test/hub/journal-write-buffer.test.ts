import t from 'tap';
import { WriteBuffer } from '../../hub/journal-files.js';

t.test('a writer buffer hands out whole lines in pieces, byte-exact, with every line\'s offset, and reuses itself', async (t) => {
  const w = new WriteBuffer();
  // ASCII, two- and three-byte UTF-8, a line longer than a piece, and many short lines past a piece's end.
  const lines = ['a\n', 'é'.repeat(400_000) + '\n', 'x'.repeat(2_000_000) + '\n', '€b\n', ...Array.from({ length: 5000 }, (_, i) => `line ${i} ${'ü'.repeat(i % 700)}\n`)];
  const starts: number[] = [];
  const pieces: Buffer[] = [];
  const seen = new Set<ArrayBufferLike>();
  for (const p of w.pieces(lines, starts)) { pieces.push(Buffer.from(p)); seen.add(p.buffer); }
  t.ok(Buffer.concat(pieces).equals(Buffer.from(lines.join(''), 'utf8')), 'the bytes are the lines, in order');
  let at = 0;
  t.same(starts, lines.map((l) => { const s = at; at += Buffer.byteLength(l); return s; }), 'each line\'s offset');
  for (const p of pieces) {
    const text = p.toString('utf8');
    t.ok(text.endsWith('\n') && !text.includes('\ufffd'), 'a piece ends on a line\'s end, no character cut');
  }
  t.ok(pieces.length > 3, 'more than one piece');
  // One buffer for the pieces that fit, one of its own for the line longer than a piece.
  t.equal(seen.size, 2);
  t.same([...w.pieces([])], [], 'nothing for no lines');
});
