import t from 'tap';
import { idParts } from '../../hub/replicate-chunks.js';
import { DEFAULT_MAX_LINE } from '../../protocol/types.js';

/**
 * Evicted and closed ids go to holders and keepers as STATE frames of parts of them. Ids run up to
 * 128 characters: 10,000 such ids (the old bound, by count only) made a frame of 1.3 MB, past the
 * 1 MiB a worker reads in one frame, and its link was cut. Each part must fit, and none be lost or
 * repeated.
 */

/** A STATE frame as the hub sends it to a holder, around the ids of one part. */
const frame = (part: string[]) => JSON.stringify({ ver: 1, id: 'h1-999999', type: 'STATE', src: 'hub-0123456789ab', dst: 'w-0123456789', payload: { full: false, entries: [], evicted: part } });

t.test('long ids: every frame fits a worker, every id once, in order', async (t) => {
  const ids = Array.from({ length: 25_000 }, (_, i) => `${String(i).padStart(8, '0')}-${'x'.repeat(119)}`);
  t.equal(ids[0]!.length, 128);
  const parts = idParts(ids);
  const biggest = Math.max(...parts.map((p) => frame(p).length));
  t.ok(biggest <= DEFAULT_MAX_LINE, `largest frame ${biggest} bytes, bound ${DEFAULT_MAX_LINE}`);
  const flat = parts.flat();
  t.equal(flat.length, ids.length, 'lost 0, duplicated 0');
  t.same(flat, ids, 'in order');
});

t.test('short ids: at most 10,000 a frame; none at all: no frame', async (t) => {
  const ids = Array.from({ length: 25_000 }, (_, i) => `t${i}`);
  t.same(idParts(ids).map((p) => p.length), [10_000, 10_000, 5_000]);
  t.same(idParts([]), []);
});
