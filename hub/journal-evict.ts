import { checkedTail, startsWith } from './journal-record.js';

/**
 * An evict record read back without JSON.parse (valid until the next call): its ids as byte ranges
 * of the line (`buf[idStart[i], idEnd[i])`, UTF-8, nothing escaped), its archive offsets as numbers.
 * A restart replays the duplicate window's every id from these records (100,000 and more at the
 * default horizon); parsed, each id was a string and an array slot made only to be copied into the
 * window's ring, and the parse was a quarter of a restart's CPU.
 */
export interface LazyEvict {
  t: 'evict';
  buf: Buffer;
  count: number;
  idStart: Int32Array;
  idEnd: Int32Array;
  offsets: Float64Array;
  file: number;
  at: number;
  end?: number;
  floor?: number;
}

const HEAD = Buffer.from('{"t":"evict","ids":[');
const FILE = Buffer.from('],"file":');
const OFFSETS = Buffer.from(',"offsets":[');
const AT = Buffer.from('],"at":');
const END = Buffer.from(',"end":');
const FLOOR = Buffer.from(',"floor":');

let scratch: LazyEvict = { t: 'evict', buf: Buffer.alloc(0), count: 0, idStart: new Int32Array(1024), idEnd: new Int32Array(1024), offsets: new Float64Array(1024), file: 0, at: 0 };

/** Where the number at `at` ends and its value (digits only, at most 15), kept in `num`; -1 if there is none. */
let num = 0;
function digits(buf: Buffer, at: number, limit: number): number {
  let v = 0, i = at;
  for (; i < limit && i - at < 16; i++) {
    const c = buf[i]!;
    if (c < 0x30 || c > 0x39) break;
    v = v * 10 + (c - 0x30);
  }
  // No leading zero (JSON has none): such a line goes to the full parse, which refuses it.
  if (i === at || i - at > 15 || (buf[at] === 0x30 && i - at > 1)) return -1;
  num = v;
  return i;
}

/**
 * The lazy form of a checked evict record exactly as this writer makes it (`t, ids, file, offsets,
 * at`, then `end` and `floor` if present; ids without escapes; plain non-negative integers), or
 * undefined: decodeLine then parses the line and reports what is wrong with it. The length and
 * CRC-32 are checked as for every line (the CRC-32 not where `trusted`: see checkedTail).
 */
export function decodeLazyEvict(buf: Buffer, start: number, end: number, trusted = false): LazyEvict | undefined {
  if (!startsWith(buf, start, HEAD)) return undefined;
  const tail = checkedTail(buf, start, end, start, trusted);
  if (tail < 0) return undefined;
  let l = scratch;
  let n = 0;
  let p = start + HEAD.length;
  if (buf[p] !== 0x5d) {
    for (;;) {
      if (buf[p] !== 0x22) return undefined;
      const s = ++p;
      for (; p < tail; p++) { const c = buf[p]!; if (c === 0x22) break; if (c === 0x5c || c < 0x20) return undefined; }
      if (p >= tail) return undefined;
      if (n === l.idStart.length) l = scratch = grow(l);
      l.idStart[n] = s;
      l.idEnd[n] = p;
      n++;
      p++;
      if (buf[p] === 0x2c) { p++; continue; }
      break;
    }
  }
  if (!startsWith(buf, p, FILE)) return undefined;
  p = digits(buf, p + FILE.length, tail);
  if (p < 0) return undefined;
  const file = num;
  if (!startsWith(buf, p, OFFSETS)) return undefined;
  p += OFFSETS.length;
  let k = 0;
  if (buf[p] !== 0x5d) {
    for (;;) {
      p = digits(buf, p, tail);
      if (p < 0 || k >= n) return undefined;
      l.offsets[k++] = num;
      if (buf[p] === 0x2c) { p++; continue; }
      break;
    }
  }
  if (k !== n || !startsWith(buf, p, AT)) return undefined;
  p = digits(buf, p + AT.length, tail);
  if (p < 0) return undefined;
  const at = num;
  let endAt: number | undefined;
  let floor: number | undefined;
  if (startsWith(buf, p, END)) {
    p = digits(buf, p + END.length, tail);
    if (p < 0) return undefined;
    endAt = num;
  }
  if (startsWith(buf, p, FLOOR)) {
    p = digits(buf, p + FLOOR.length, tail);
    if (p < 0) return undefined;
    floor = num;
  }
  if (p !== tail) return undefined;
  l.buf = buf; l.count = n; l.file = file; l.at = at; l.end = endAt; l.floor = floor;
  return l;
}

function grow(l: LazyEvict): LazyEvict {
  const cap = l.idStart.length * 2;
  const idStart = new Int32Array(cap), idEnd = new Int32Array(cap), offsets = new Float64Array(cap);
  idStart.set(l.idStart); idEnd.set(l.idEnd); offsets.set(l.offsets);
  return { ...l, idStart, idEnd, offsets };
}
