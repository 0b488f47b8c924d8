// Apart from host.ts: no node-llama-cpp here (types only), so `swarm engine which` and the benches can
// ask what the engine would make.
import { flashAttnChoice, type AttentionShape, type FlashAttnChoice, type FlashAttnSetting } from './flash-attn.js';

/** `--driver-opt kv_unified`: `auto` (the default) decides from the model's shape (kvLayoutChoice); a boolean fixes it. */
export type KvUnifiedSetting = 'auto' | boolean;

/**
 * What one KV cell costs each row of a unified cache's flash attention that does not attend to it, in
 * multiply-adds of the layers' weights. ggml's CPU kernel walks every cell of the cache in use (all
 * sequences' cells, up to the highest one used) for each query row, head and layer, and skips a masked
 * one after reading its mask; a KV stream per sequence walks only the sequence's own. Measured: synth
 * 110M, 25 sequences of about 70 tokens all generating, one thread, the engine alone
 * (bench/engine-cpu.ts): llama.cpp's thread took 3,941-3,997 µs a token unified against 3,528-3,722
 * with a stream per sequence, about 275 µs for 144 heads x layers x ~1,750 cells, where the layers'
 * 85M multiply-adds took ~3,700 µs: one skipped cell is about 25 of them.
 */
export const MASK_CELL_MACS = 25;

/**
 * Most of a token's layer weights that the walk over a full unified cache may cost before `auto`
 * keeps a stream per sequence instead. A stream per sequence costs a busy agent among idle ones a pass
 * over the weights of its own when its neighbours are idle (llama.cpp batches only consecutive
 * sequence ids): 0.76x of the unified engine for 3 spread agents of 25, synth 110M at two threads,
 * none at one thread; the walk costs every token, in every mix, and grows as the agents' histories do.
 */
export const UNIFIED_SCAN_MAX_SHARE = 0.25;

/**
 * With flash attention off, attention is two matrix products over every cell of a unified cache in
 * use (the mask zeroes the other sequences' only afterwards): per cell, head and layer, a key's and a
 * value's head size in multiply-adds, plus its softmax (counted as 16). Beyond this many times a
 * token's layer weights over a full cache, `auto` keeps a stream per sequence: stories260K (heads of 8,
 * 226K multiply-adds of weights a token), 25 agents of 512 tokens, end to end, unified against a stream
 * each (bench/swarm-vs-server.ts, docs/performance.md); synth 15M's bench sizes (8 and 25 agents of
 * 512, 3-9x) stay unified, where the unified engine measured 1.03-1.19x the cheapest bare server.
 */
export const UNIFIED_ATTN_MAX_SHARE = 16;

/** Multiply-adds of the layers' weights per token (q, k, v, o and the three feed-forward matrices). */
export function layerWeights(s: AttentionShape): number {
  return s.layers * (2 * s.dim * s.dim + 2 * s.dim * s.kvHeads * s.headDim + 3 * s.dim * s.ff);
}

export interface KvLayoutChoice { unified: boolean; why: string; flashAttn: FlashAttnChoice }

/**
 * The engine's KV layout and, with it, flash attention (whose verdict depends on the layout). A unified
 * cache batches any set of busy sequences in one pass and copies a shared prefix as cell metadata; a
 * stream per sequence keeps each token's attention to the sequence's own cells. With flash attention
 * on, the unified cache's kernel walks every sequence's cells for each row (MASK_CELL_MACS): `auto`
 * keeps it unified while that walk over a full cache (sequences x ctx cells) stays within
 * UNIFIED_SCAN_MAX_SHARE of a token's weights (synth 110M: up to ~5,900 cells, so 8 agents of 512
 * tokens unified, 25 of 512 or 8 of 2,048 a stream each; a 7B model's 1,024 heads x layers against
 * ~6.5G multiply-adds: up to ~63,000). With it off (heads the kernel runs scalar) attention is a matrix
 * product over all those cells, which tiny models cannot carry (UNIFIED_ATTN_MAX_SHARE). `canUnify`:
 * the binding takes the option (the self-built addon).
 */
export function kvLayoutChoice(o: {
  setting: KvUnifiedSetting; canUnify: boolean; flashAttn: FlashAttnSetting; shape: AttentionShape | undefined;
  systemInfo: string; sequences: number; ctx: number;
}): KvLayoutChoice {
  const kv = (unified: boolean) => ({ unified, sequences: o.sequences, ctx: o.ctx });
  const streams = (why: string): KvLayoutChoice => ({ unified: false, why, flashAttn: flashAttnChoice(o.flashAttn, o.shape, o.systemInfo, kv(false)) });
  if (!o.canUnify) return streams("the prebuilt binding keeps a stream per sequence");
  if (o.setting === false) return streams('kv_unified=0');
  const fa = flashAttnChoice(o.flashAttn, o.shape, o.systemInfo, kv(true));
  if (o.setting === true) return { unified: true, why: 'kv_unified=1', flashAttn: fa };
  const plain = !o.shape || !(o.shape.ff > 0) ? 'model shape unknown' : o.sequences <= 1 ? 'one sequence' : undefined;
  if (plain || !o.shape) return { unified: true, why: `auto: ${plain}`, flashAttn: fa };
  const cells = o.sequences * o.ctx;
  if (!fa.on) {
    const attn = o.shape.heads * o.shape.layers * cells * (2 * o.shape.headDim + 16) / layerWeights(o.shape);
    const times = attn < 10 ? attn.toFixed(1) : String(Math.round(attn));
    if (attn <= UNIFIED_ATTN_MAX_SHARE) return { unified: true, why: `auto: flash attention off, and attention over a full cache's ${cells} cells costs ~${times}x a token's weights, at most ${UNIFIED_ATTN_MAX_SHARE}x`, flashAttn: fa };
    return streams(`auto: attention over a unified cache's ${cells} cells (${o.sequences} sequences of ${o.ctx} tokens) with flash attention off would cost ~${times}x a token's weights (above ${UNIFIED_ATTN_MAX_SHARE}x; kv_unified=1 keeps it unified)`);
  }
  const share = o.shape.heads * o.shape.layers * cells * MASK_CELL_MACS / layerWeights(o.shape);
  const pct = Math.round(share * 100);
  if (share <= UNIFIED_SCAN_MAX_SHARE) return { unified: true, why: `auto: a full cache's ${cells} cells cost flash attention ~${pct}% of a token's weights, at most ${UNIFIED_SCAN_MAX_SHARE * 100}%`, flashAttn: fa };
  return streams(`auto: a unified cache's ${cells} cells (${o.sequences} sequences of ${o.ctx} tokens), walked by flash attention for every token, would cost ~${pct}% of its weights (above ${UNIFIED_SCAN_MAX_SHARE * 100}%; kv_unified=1 keeps it unified)`);
}
