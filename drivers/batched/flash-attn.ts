// Apart from generate.ts and host.ts: it must not load node-llama-cpp (types only), so a worker or a
// bench can ask what the engine would choose.
import fs from 'node:fs';
import type { LlamaModel } from 'node-llama-cpp';
import { SwarmError } from '../../protocol/index.js';

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

/** The KV layout the engine makes: one unified cache for all sequences, or a stream per sequence; `ctx`: tokens per sequence. */
export interface KvLayout { unified: boolean; sequences: number; ctx?: number }

/**
 * Most sequences of a unified KV cache for which `auto` turns flash attention off on heads the kernel
 * runs scalar, whatever their context size. Off, attention is a matrix product over every cell in use,
 * all sequences' (the mask only zeroes the others' afterwards), where flash attention skips the masked
 * cells: synth 15M, one sequence generating while the others hold 1,400 tokens each, one thread, a
 * generated token cost 11.9 ms off against 24.9 on with 2 sequences, 23.1 against 21.6 with 4 and 44.7
 * against 18.5 with 8, and a 1,400-token prompt 2x, 3.8x and 4.6x the CPU.
 */
export const UNIFIED_OFF_MAX_SEQUENCES = 4;

/**
 * Most KV cells (sequences x context tokens per sequence) of a unified cache for which `auto` turns
 * flash attention off on such heads with more sequences than UNIFIED_OFF_MAX_SEQUENCES. The product
 * bounds what off can attend over. When the engine's sequences generate together (every busy agent's
 * token in one batch) off is one matrix product for the whole batch and wins at every size measured:
 * synth 15M, one thread, a generated token 0.35-0.83x the CPU of on at 4-25 sequences of 32-1,024
 * tokens (bench/flash-attn.ts --grid). What it loses is a prompt (each prompt token attends over
 * every cell: 2.7-3.6x on's CPU once the cache holds 4,000-6,400 tokens) and a lone generating agent
 * beside idle ones that hold theirs (one of 8 holding 256-1,024 tokens each: 2.0-2.2x on's CPU a
 * token; one of 25 holding 64-512: 1.9-6.0x); both grow with the cells the cache can hold, so past
 * this bound `auto` keeps flash attention on. The bound keeps off for 8 agents of `swarm up`'s 2,048
 * tokens and 25 of 512, and on for 25 of 2,048.
 */
export const UNIFIED_OFF_MAX_CELLS = 16_384;

/**
 * Flash attention on or off for one context (llama.cpp fixes it when the context is made). On the
 * CPU, ggml's flash-attention kernel walks every cached cell once per query row, head and layer for a
 * batch under 64 query tokens, which every generated token is; with a head size that is not a multiple
 * of the f16 step (f16Step) that walk runs scalar (synth 15M, heads of 48, one thread: 22 ms of CPU a
 * generated token after 1,900 tokens, against 7.1 ms off). Off, attention is two matrix products, but a
 * prompt builds its whole attention matrix: 1.3-1.7x the CPU of a long prompt on the same shape. The
 * two break even at about one generated token per 65-110 evaluated prompt tokens (bench/flash-attn.ts);
 * agents generate far more than that (and the prefix cache spares most prompt tokens), so `auto` turns
 * it off for such heads: always with a KV stream per sequence, and with a unified cache of up to
 * UNIFIED_OFF_MAX_SEQUENCES sequences or up to UNIFIED_OFF_MAX_CELLS cells (beyond, off would attend
 * over every sequence's cells in every prompt and every lone agent's token). Heads of 8 (stories260K)
 * are faster off at every length, prompts included; heads of 64 (synth 110M) faster on.
 * Where the shape is unknown it stays on, as llama.cpp's own auto has it. Without `kv`, the verdict
 * for one sequence.
 */
export function flashAttnChoice(setting: FlashAttnSetting, shape: AttentionShape | undefined, systemInfo: string, kv?: KvLayout): FlashAttnChoice {
  if (setting === 'on') return { on: true, why: 'flash_attn=on' };
  if (setting === 'off') return { on: false, why: 'flash_attn=off' };
  if (!shape) return { on: true, why: 'auto: model shape unknown' };
  const step = f16Step(systemInfo);
  if (step > 0 && shape.headDim % step === 0) return { on: true, why: `auto: head size ${shape.headDim} fills the CPU's ${step}-lane f16 loops` };
  const scalar = `head size ${shape.headDim} is not a multiple of the CPU's ${step || 'scalar'}${step ? '-lane' : ''} f16 loops`;
  if (kv?.unified && kv.sequences > UNIFIED_OFF_MAX_SEQUENCES) {
    const cells = kv.ctx === undefined ? undefined : kv.sequences * kv.ctx;
    if (cells !== undefined && cells <= UNIFIED_OFF_MAX_CELLS) {
      return { on: false, why: `auto: ${scalar}, and the unified KV cache holds at most ${cells} cells (${kv.sequences} sequences of ${kv.ctx} tokens; off above ${UNIFIED_OFF_MAX_CELLS})` };
    }
    return { on: true, why: `auto: ${scalar}, but off would attend over all ${kv.sequences} sequences${cells ? ` (${cells} cells, above ${UNIFIED_OFF_MAX_CELLS})` : ''} of the unified KV cache (a smaller ctx, kv_unified=0 or flash_attn=off turns it off)` };
  }
  return { on: false, why: `auto: ${scalar}, so per-token attention would run scalar` };
}

/**
 * What the batched engine would choose for `modelPath` on this machine with `sequences` sequences of
 * `ctx` tokens: from the binding it loads (its CPU variant's system info, and whether it is the
 * self-built one, with which kv-layout.ts decides whether the KV cache is unified) and the file's
 * metadata, without loading the weights. Loaded on demand, so that importing this file stays cheap.
 */
export async function probeFlashAttn(modelPath: string, o: { setting?: FlashAttnSetting; sequences: number; ctx: number; kvUnified?: 'auto' | boolean }): Promise<FlashAttnChoice & { shape: AttentionShape | undefined; kv: KvLayout & { why: string } }> {
  const [{ readGgufFileInfo, LlamaLogLevel }, { loadLlama }, { kvLayoutChoice }] = await Promise.all([import('node-llama-cpp'), import('../embedded/load-llama.js'), import('./kv-layout.js')]);
  if (!fs.existsSync(modelPath)) throw new SwarmError('SWARM_ERR_CONFIG', `model not found: ${modelPath}`);
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: false });
  const shape = attentionShape({ fileInfo: info } as unknown as Pick<LlamaModel, 'fileInfo'>);
  const { llama, path: loadPath } = await loadLlama({ logLevel: LlamaLogLevel.error, logger: () => {}, selfBuilt: true });
  // As host.ts: the context is capped at the model's training context.
  const train = (info.architectureMetadata as { context_length?: number }).context_length;
  const ctx = train ? Math.min(o.ctx, train) : o.ctx;
  const layout = kvLayoutChoice({ setting: o.kvUnified ?? 'auto', canUnify: loadPath === 'self-built', flashAttn: o.setting ?? 'auto', shape, systemInfo: llama.systemInfo, sequences: o.sequences, ctx });
  return { ...layout.flashAttn, shape, kv: { unified: layout.unified, why: layout.why, sequences: o.sequences, ctx } };
}
