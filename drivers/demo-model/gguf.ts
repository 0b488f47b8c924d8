/**
 * A minimal GGUF (v3) writer: metadata key/values and F32 tensors, enough for a llama model that
 * llama.cpp loads. Layout: header, key/values, tensor infos, padding, then tensor data, each tensor
 * at an offset aligned to `general.alignment` (32 by default).
 */

const ALIGN = 32;

/** GGUF metadata value types. */
const T = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;
/** ggml tensor type F32. */
const GGML_F32 = 0;

/** One metadata value: scalars are tagged, arrays hold one element type. */
export type GgufValue =
  | { u32: number } | { f32: number } | { bool: boolean } | { str: string }
  | { strings: string[] } | { f32s: number[] } | { i32s: number[] };

/** A tensor: its name, its ggml shape `ne` (fastest dimension first) and its data. */
export interface GgufTensor { name: string; ne: number[]; data: Float32Array }

/** Growable little-endian byte buffer. */
class Out {
  private buf = Buffer.alloc(1 << 16);
  len = 0;
  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const b = Buffer.alloc(size);
    this.buf.copy(b, 0, 0, this.len);
    this.buf = b;
  }
  u32(v: number): void { this.room(4); this.buf.writeUInt32LE(v, this.len); this.len += 4; }
  i32(v: number): void { this.room(4); this.buf.writeInt32LE(v, this.len); this.len += 4; }
  u64(v: number): void { this.room(8); this.buf.writeBigUInt64LE(BigInt(v), this.len); this.len += 8; }
  f32(v: number): void { this.room(4); this.buf.writeFloatLE(v, this.len); this.len += 4; }
  u8(v: number): void { this.room(1); this.buf[this.len++] = v; }
  str(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.bytes(b); }
  bytes(b: Uint8Array): void { this.room(b.length); this.buf.set(b, this.len); this.len += b.length; }
  pad(): void { while (this.len % ALIGN) this.u8(0); }
  result(): Buffer { return this.buf.subarray(0, this.len); }
}

function writeValue(o: Out, v: GgufValue): void {
  if ('u32' in v) { o.u32(T.u32); o.u32(v.u32); } else if ('f32' in v) { o.u32(T.f32); o.f32(v.f32); } else if ('bool' in v) { o.u32(T.bool); o.u8(v.bool ? 1 : 0); } else if ('str' in v) { o.u32(T.string); o.str(v.str); } else if ('strings' in v) {
    o.u32(T.array); o.u32(T.string); o.u64(v.strings.length);
    for (const s of v.strings) o.str(s);
  } else if ('f32s' in v) {
    o.u32(T.array); o.u32(T.f32); o.u64(v.f32s.length);
    for (const x of v.f32s) o.f32(x);
  } else {
    o.u32(T.array); o.u32(T.i32); o.u64(v.i32s.length);
    for (const x of v.i32s) o.i32(x);
  }
}

/** Serialize a GGUF file (metadata in insertion order, F32 tensors) into one buffer. */
export function encodeGguf(meta: [string, GgufValue][], tensors: GgufTensor[]): Buffer {
  const o = new Out();
  o.bytes(Buffer.from('GGUF', 'ascii'));
  o.u32(3);
  o.u64(tensors.length);
  o.u64(meta.length);
  for (const [k, v] of meta) { o.str(k); writeValue(o, v); }
  let offset = 0;
  for (const t of tensors) {
    const n = t.ne.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new Error(`tensor ${t.name}: shape ${t.ne.join('x')} needs ${n} values, has ${t.data.length}`);
    o.str(t.name);
    o.u32(t.ne.length);
    for (const d of t.ne) o.u64(d);
    o.u32(GGML_F32);
    o.u64(offset);
    offset += Math.ceil((n * 4) / ALIGN) * ALIGN;
  }
  o.pad();
  for (const t of tensors) {
    o.bytes(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    o.pad();
  }
  return o.result();
}
