/**
 * Byte sizes of ggml tensor types for the capacity planner (sizes for people: protocol/bytes.ts).
 * Block sizes come from ggml's type traits (ggml/src/ggml.c): bytes per block / elements per block.
 */

/** ggml type id -> [name, bytes per block, elements per block]. */
export const GGML_TYPES: Readonly<Record<number, readonly [string, number, number]>> = {
  0: ['F32', 4, 1], 1: ['F16', 2, 1], 2: ['Q4_0', 18, 32], 3: ['Q4_1', 20, 32],
  6: ['Q5_0', 22, 32], 7: ['Q5_1', 24, 32], 8: ['Q8_0', 34, 32], 9: ['Q8_1', 36, 32],
  10: ['Q2_K', 84, 256], 11: ['Q3_K', 110, 256], 12: ['Q4_K', 144, 256], 13: ['Q5_K', 176, 256],
  14: ['Q6_K', 210, 256], 15: ['Q8_K', 292, 256], 16: ['IQ2_XXS', 66, 256], 17: ['IQ2_XS', 74, 256],
  18: ['IQ3_XXS', 98, 256], 19: ['IQ1_S', 50, 256], 20: ['IQ4_NL', 18, 32], 21: ['IQ3_S', 110, 256],
  22: ['IQ2_S', 82, 256], 23: ['IQ4_XS', 136, 256], 24: ['I8', 1, 1], 25: ['I16', 2, 1], 26: ['I32', 4, 1],
  27: ['I64', 8, 1], 28: ['F64', 8, 1], 29: ['IQ1_M', 56, 256], 30: ['BF16', 2, 1],
  34: ['TQ1_0', 54, 256], 35: ['TQ2_0', 66, 256], 39: ['MXFP4', 17, 32],
};

/**
 * Types llama.cpp's CPU backend repacks on x86 with AVX2/AVX-512 into an interleaved private buffer
 * (ggml-cpu/repack.cpp: q4_0 -> 8x8, q4_K -> 8x8, iq4_nl -> 8x8). A repacked tensor is copied out of
 * the shared mmap into anonymous memory of each engine process.
 */
export const REPACKED_ON_X86: ReadonlySet<string> = new Set(['Q4_0', 'Q4_K', 'IQ4_NL']);

/** Name of a ggml type id ("T<id>" when unknown). */
export function typeName(id: number): string { return GGML_TYPES[id]?.[0] ?? `T${id}`; }

/** Bytes a tensor of `elements` elements of type `id` takes (0 when the type is unknown). */
export function tensorBytes(id: number, elements: number): number {
  const t = GGML_TYPES[id];
  return t ? Math.ceil(elements / t[2]) * t[1] : 0;
}

/** Kubernetes quantity in Mi, rounded up (requests/limits). */
export function toMi(n: number): string { return `${Math.ceil(n / 1024 ** 2)}Mi`; }
