// Apart from generate.ts and host.ts: it must not load node-llama-cpp (types only), so a worker or a
// bench can ask what the engine would choose.
import type { LlamaModel } from 'node-llama-cpp';

/** `--driver-opt flash_attn`: `auto` decides from the model's shape and the CPU (flashAttnChoice). */
export type FlashAttnSetting = 'auto' | 'on' | 'off';

/** The attention shape of a model, from its GGUF metadata. */
export interface AttentionShape { headDim: number; heads: number; kvHeads: number; layers: number; dim: number; ff: number }

/** The model's attention shape; undefined when its file does not say. */
export function attentionShape(model: Pick<LlamaModel, 'fileInfo'>): AttentionShape | undefined {
  const a = model.fileInfo.architectureMetadata as {
    embedding_length?: number; block_count?: number; feed_forward_length?: number;
    attention?: { head_count?: number; head_count_kv?: number | number[]; key_length?: number };
  };
  const dim = a.embedding_length, layers = a.block_count, heads = a.attention?.head_count, ff = a.feed_forward_length;
  if (!dim || !layers || !heads) return undefined;
  const kvHeads = typeof a.attention?.head_count_kv === 'number' ? a.attention.head_count_kv : heads;
  return { headDim: a.attention?.key_length ?? dim / heads, heads, kvHeads, layers, dim, ff: ff ?? 0 };
}

/**
 * How many f16 lanes ggml's CPU vector loops (ggml_vec_dot_f16, ggml_vec_mad_f16) take per step:
 * four vectors (ggml-cpu/simd-mappings.h, GGML_F16_STEP), so 128 with AVX512-FP16, 64 with AVX-512,
 * 32 with SSE3/AVX/AVX2 or NEON with f16 arithmetic, 16 with plain NEON. What is left below a multiple
 * of it runs one element at a time, converting each half to float and back. 0: no SIMD, all scalar.
 */
export function f16Step(systemInfo: string): number {
  if (/AVX512_FP16 = 1/.test(systemInfo)) return 128;
  if (/AVX512 = 1/.test(systemInfo)) return 64;
  if (/\b(SSE3|AVX2?) = 1/.test(systemInfo)) return 32;
  if (/\b(NEON|SVE) = 1/.test(systemInfo)) return /FP16_VA = 1/.test(systemInfo) ? 32 : 16;
  return 0;
}

/** What the engine runs with and why (its log and `swarm engine which` say it). */
export interface FlashAttnChoice { on: boolean; why: string }

/**
 * Flash attention on or off for one context (llama.cpp fixes it when the context is made). On the
 * CPU, ggml's flash-attention kernel walks every cached cell once per query row, head and layer for a
 * batch under 64 query tokens, which every generated token is; with a head size that is not a multiple
 * of the f16 step (f16Step) that walk runs scalar, about 280 ns per row, cell, head and layer (synth
 * 15M, heads of 48: 76 ms a generated token after 1,464 tokens, against 14 ms off). Off, attention is
 * two matrix products whose long dimension (the cells) is vectorized, but a long prompt builds its whole
 * attention matrix (about 3x slower prompts on the same shape). An agent generates far more than the
 * one token in ~30 evaluated prompt tokens at which the two break even (bench/flash-attn.ts; with the
 * prefix cache most prompt tokens are not evaluated at all), so `auto` turns it off for such heads
 * and keeps it on where the kernel is vectorized, or where the shape is unknown (llama.cpp's own auto).
 */
export function flashAttnChoice(setting: FlashAttnSetting, shape: AttentionShape | undefined, systemInfo: string): FlashAttnChoice {
  if (setting === 'on') return { on: true, why: 'flash_attn=on' };
  if (setting === 'off') return { on: false, why: 'flash_attn=off' };
  if (!shape) return { on: true, why: 'auto: model shape unknown' };
  const step = f16Step(systemInfo);
  if (step > 0 && shape.headDim % step === 0) return { on: true, why: `auto: head size ${shape.headDim} fills the CPU's ${step}-lane f16 loops` };
  return { on: false, why: `auto: head size ${shape.headDim} is not a multiple of the CPU's ${step || 'scalar'}${step ? '-lane' : ''} f16 loops (per-token attention would run scalar)` };
}
