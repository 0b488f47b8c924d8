/**
 * The model facts the planner needs, read from a GGUF header with node-llama-cpp's `readGgufFileInfo`
 * (header only: a 5 GB file is not read, and a sparse header-only file works the same).
 */
import fs from 'node:fs/promises';
import { REPACKED_ON_X86, tensorBytes, typeName } from './sizes.js';

/** Shape and storage facts of one GGUF model. */
export interface ModelShape {
  path: string;
  architecture: string;
  name?: string;
  /** Size of the file on disk (= what mmap shares through the page cache). */
  fileBytes: number;
  layers: number;
  headCount: number;
  /** KV heads per layer, summed over layers when the file gives a per-layer array. */
  kvHeadsTotal: number;
  /** KV heads of a layer (the first when per-layer). */
  headCountKv: number;
  keyLength: number;
  valueLength: number;
  embeddingLength: number;
  vocabSize: number;
  trainContext: number;
  /** ggml type holding most tensor bytes, e.g. Q4_K (the file's "quantization"). */
  dominantType: string;
  /** Bytes of tensor data per ggml type name. */
  bytesByType: Record<string, number>;
  /** Bytes llama.cpp copies into a private repacked buffer per engine process on x86 (Q4_0/Q4_K/IQ4_NL matmul weights). */
  repackableBytes: number;
}

interface TensorLike { name: string; dimensions: readonly (number | bigint)[]; ggmlType: number }

type Meta = Record<string, unknown>;
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : undefined);

/** Build a ModelShape from parsed GGUF metadata and tensor infos (pure; tests call it directly). */
export function shapeFromGguf(p: {
  path: string; fileBytes: number; metadata: Meta; arch: Meta; tensors: readonly TensorLike[];
}): ModelShape {
  const general = (p.metadata.general ?? {}) as Meta;
  const attention = (p.arch.attention ?? {}) as Meta;
  const layers = num(p.arch.block_count) ?? 0;
  const headCount = firstOf(attention.head_count) ?? 0;
  const kvRaw = attention.head_count_kv ?? attention.head_count;
  const kvHeadsTotal = Array.isArray(kvRaw) ? kvRaw.reduce((s: number, v) => s + (num(v) ?? 0), 0) : (num(kvRaw) ?? 0) * layers;
  const embeddingLength = num(p.arch.embedding_length) ?? 0;
  const headDim = headCount > 0 ? embeddingLength / headCount : 0;
  const tokens = ((p.metadata.tokenizer as Meta | undefined)?.ggml as Meta | undefined)?.tokens;
  const bytesByType: Record<string, number> = {};
  let repackableBytes = 0;
  for (const t of p.tensors) {
    const elements = t.dimensions.reduce((a: number, d) => a * Number(d), 1);
    const bytes = tensorBytes(t.ggmlType, elements);
    const name = typeName(t.ggmlType);
    bytesByType[name] = (bytesByType[name] ?? 0) + bytes;
    // token_embd is read with GET_ROWS, which the repack buffer does not take; only matmul weights move.
    if (REPACKED_ON_X86.has(name) && t.dimensions.length >= 2 && !t.name.startsWith('token_embd')) repackableBytes += bytes;
  }
  const dominantType = Object.entries(bytesByType).sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'unknown';
  return {
    path: p.path,
    architecture: String(general.architecture ?? 'unknown'),
    ...(typeof general.name === 'string' ? { name: general.name } : {}),
    fileBytes: p.fileBytes,
    layers,
    headCount,
    kvHeadsTotal,
    headCountKv: firstOf(kvRaw) ?? 0,
    keyLength: num(attention.key_length) ?? headDim,
    valueLength: num(attention.value_length) ?? headDim,
    embeddingLength,
    vocabSize: num(p.arch.vocab_size) ?? (Array.isArray(tokens) ? tokens.length : 0),
    trainContext: num(p.arch.context_length) ?? 0,
    dominantType,
    bytesByType,
    repackableBytes,
  };
}

function firstOf(v: unknown): number | undefined {
  return Array.isArray(v) ? num(v[0]) : num(v);
}

/** Read a GGUF file's header and return its shape. Throws when the file is not a GGUF. */
export async function readModelShape(path: string): Promise<ModelShape> {
  const st = await fs.stat(path);
  // Loaded on use: node-llama-cpp adds ~30 MB to every process that imports it (every worker runs the CLI).
  const { readGgufFileInfo } = await import('node-llama-cpp');
  const info = await readGgufFileInfo(path, { readTensorInfo: true });
  return shapeFromGguf({
    path,
    fileBytes: st.size,
    metadata: info.metadata as unknown as Meta,
    arch: info.architectureMetadata as unknown as Meta,
    tensors: (info.fullTensorInfo ?? info.tensorInfo ?? []) as readonly TensorLike[],
  });
}
