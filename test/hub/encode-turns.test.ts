import t from 'tap';
import { encodeInTurns } from '../../hub/encode-turns.js';

/** A large archive write is encoded a bounded turn of the event loop at a time, in order. */

t.test('2,500 lines of 5 KB: a turn ends at 2 MiB (or 1,000 items), every line once and in order', async (t) => {
  const items = Array.from({ length: 2500 }, (_, i) => i);
  const turns: number[][] = [[]];
  const line = (i: number) => `${i}:${'x'.repeat(5000)}`;
  const out = await encodeInTurns(items, (i) => { turns.at(-1)!.push(i); return line(i); }, { items: 1000, chars: 2 * 1024 * 1024 }, async () => { turns.push([]); });
  t.equal(out.length, 2500, 'every item encoded');
  t.ok(out.every((l, i) => l.startsWith(`${i}:`)), 'in order');
  t.ok(turns.length >= 6, `in ${turns.length} turns`);
  const chars = turns.map((x) => x.reduce((a, i) => a + line(i).length, 0));
  t.ok(turns.every((x, k) => x.length >= 1 && chars[k]! - line(x.at(-1)!).length < 2 * 1024 * 1024), `each under 2 MiB before its last line (${turns.map((x) => x.length).join(', ')} items)`);
});

t.test('small items: a turn ends at the item bound; one item larger than a turn goes alone', async (t) => {
  let turns = 1;
  await encodeInTurns(Array.from({ length: 2500 }, (_, i) => i), (i) => String(i), { items: 1000, chars: 2 * 1024 * 1024 }, async () => { turns++; });
  t.equal(turns, 3, '2,500 small items: 3 turns of at most 1,000');
  const sizes: number[] = [0];
  await encodeInTurns([10, 3_000_000, 10], (n) => { sizes[sizes.length - 1]! += 1; return 'y'.repeat(n); }, { items: 1000, chars: 2 * 1024 * 1024 }, async () => { sizes.push(0); });
  t.same(sizes, [2, 1], 'the 3 MB item ends its turn; the next starts a new one');
});
