/**
 * Writes GGUF v3 files that have a real header (metadata and tensor infos) but no tensor data: the file
 * is extended sparsely to the size the tensors would take, so a "5 GB" model costs a few KB of disk.
 * The capacity planner reads only the header, which makes these stand-ins for models we cannot ship.
 */
import fs from 'node:fs';

/** A metadata value: number (u32 unless `f32`/`u64` wrapped), string, or array of strings/numbers. */
export type GgufValue = number | string | { f32: number } | { u64: number } | readonly (number | string)[];

/** One tensor's info: name, dims (innermost first, as GGUF stores them), ggml type id. */
export interface GgufTensor { name: string; dims: readonly number[]; type: number }

const T = { U32: 4, F32: 6, STRING: 8, ARRAY: 9, U64: 10 } as const;
const BLOCK: Record<number, [number, number]> = { 0: [4, 1], 1: [2, 1], 2: [18, 32], 8: [34, 32], 12: [144, 256], 14: [210, 256] };

class Buf {
  parts: Buffer[] = [];
  size = 0;
  push(b: Buffer): void { this.parts.push(b); this.size += b.length; }
  u32(n: number): void { const b = Buffer.alloc(4); b.writeUInt32LE(n); this.push(b); }
  u64(n: number): void { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); this.push(b); }
  f32(n: number): void { const b = Buffer.alloc(4); b.writeFloatLE(n); this.push(b); }
  str(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
}

/** Bytes of one tensor's data (for the types this helper knows). */
export function ggufTensorBytes(t: GgufTensor): number {
  const bl = BLOCK[t.type];
  if (!bl) throw new Error(`gguf-writer: unknown type ${t.type}`);
  return Math.ceil(t.dims.reduce((a, d) => a * d, 1) / bl[1]) * bl[0];
}

/** Write the file; returns its size (header + aligned, sparse tensor data). */
export function writeGguf(file: string, meta: Record<string, GgufValue>, tensors: readonly GgufTensor[]): number {
  const b = new Buf();
  b.push(Buffer.from('GGUF'));
  b.u32(3);
  b.u64(tensors.length);
  b.u64(Object.keys(meta).length);
  for (const [k, v] of Object.entries(meta)) {
    b.str(k);
    if (typeof v === 'string') { b.u32(T.STRING); b.str(v); }
    else if (typeof v === 'number') { b.u32(T.U32); b.u32(v); }
    else if ('f32' in v) { b.u32(T.F32); b.f32(v.f32); }
    else if ('u64' in v) { b.u32(T.U64); b.u64(v.u64); }
    else {
      const arr = v as readonly (number | string)[];
      const strings = typeof arr[0] === 'string';
      b.u32(T.ARRAY); b.u32(strings ? T.STRING : T.U32); b.u64(arr.length);
      for (const x of arr) { if (strings) b.str(String(x)); else b.u32(Number(x)); }
    }
  }
  let offset = 0;
  const align = (n: number): number => Math.ceil(n / 32) * 32;
  for (const t of tensors) {
    b.str(t.name);
    b.u32(t.dims.length);
    for (const d of t.dims) b.u64(d);
    b.u32(t.type);
    b.u64(offset);
    offset = align(offset + ggufTensorBytes(t));
  }
  const header = Buffer.concat(b.parts);
  const dataStart = align(header.length);
  const total = dataStart + offset;
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, header);
    fs.ftruncateSync(fd, total);
  } finally { fs.closeSync(fd); }
  return total;
}

/**
 * Llama-3-8B's shape (32 layers, n_embd 4096, 32 heads, 8 KV heads, head size 128, FFN 14336, vocab 128256)
 * with a Q4_K_M-like type mix: attn_v and ffn_down and output in Q6_K, other matrices Q4_K, norms F32.
 */
export function llama3_8bShape(): { meta: Record<string, GgufValue>; tensors: GgufTensor[] } {
  const E = 4096, F = 14336, V = 128256, KV = 1024, Q4K = 12, Q6K = 14, F32 = 0;
  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', dims: [E, V], type: Q4K },
    { name: 'output_norm.weight', dims: [E], type: F32 },
    { name: 'output.weight', dims: [E, V], type: Q6K },
  ];
  for (let i = 0; i < 32; i++) {
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, dims: [E], type: F32 },
      { name: `blk.${i}.attn_q.weight`, dims: [E, E], type: Q4K },
      { name: `blk.${i}.attn_k.weight`, dims: [E, KV], type: Q4K },
      { name: `blk.${i}.attn_v.weight`, dims: [E, KV], type: Q6K },
      { name: `blk.${i}.attn_output.weight`, dims: [E, E], type: Q4K },
      { name: `blk.${i}.ffn_norm.weight`, dims: [E], type: F32 },
      { name: `blk.${i}.ffn_gate.weight`, dims: [E, F], type: Q4K },
      { name: `blk.${i}.ffn_up.weight`, dims: [E, F], type: Q4K },
      { name: `blk.${i}.ffn_down.weight`, dims: [F, E], type: Q6K },
    );
  }
  const meta: Record<string, GgufValue> = {
    'general.architecture': 'llama',
    'general.name': 'llama-3-8b-shape (header only)',
    'general.file_type': 15,
    'llama.context_length': 8192,
    'llama.embedding_length': E,
    'llama.block_count': 32,
    'llama.feed_forward_length': F,
    'llama.attention.head_count': 32,
    'llama.attention.head_count_kv': 8,
    'llama.attention.layer_norm_rms_epsilon': { f32: 1e-5 },
    'llama.rope.dimension_count': 128,
    'llama.rope.freq_base': { f32: 500000 },
    'llama.vocab_size': V,
  };
  return { meta, tensors };
}
