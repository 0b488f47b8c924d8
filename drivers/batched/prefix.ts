// Apart from generate.ts: a worker imports this, and must not load node-llama-cpp (about 10 MB of its memory).
/** How many leading tokens of `want` the sequence holds already (at least one token is always evaluated). */
export function cachedPrefix<T>(held: readonly T[], want: readonly T[]): number {
  const max = Math.min(held.length, want.length - 1);
  let i = 0;
  while (i < max && held[i] === want[i]) i++;
  return i;
}

/** What the cost of a short prompt tail depends on: the model's attention shape and weights per token. */
export interface TailShape {
  /** Dimensions per attention head (key length). */
  headDim: number;
  /** Query heads times layers: the attention rows each prompt token adds. */
  headLayers: number;
  /** Multiply-adds of the layers' weights per token (the output layer runs for the last token only). */
  weightsPerToken: number;
}

/**
 * ggml's CPU flash attention takes a tiled kernel for batches of at least this many query tokens, and
 * otherwise walks every cached cell once per query row and head.
 */
export const FA_TILE = 64;

/**
 * Where to start evaluating a prompt of `total` tokens whose first `cached` are held (or copied): a
 * little earlier than `cached` when that is cheaper. With flash attention on the CPU, a tail of fewer
 * than 64 tokens takes ggml's per-row kernel, whose f16 dot product and accumulation run scalar when
 * the head size is not a multiple of the 64 lanes they unroll to (AVX-512); with heads of 48 (the 15M
 * shape) 12 tokens after 1,453 cached took 150-190 ms of CPU, against 35-45 ms for 64 tokens through
 * the tiled kernel. So such a tail is widened to 64 tokens when the per-row attention would cost more
 * than the weights of the extra tokens (measured: one query row against one cached cell costs about as
 * much as 60 multiply-adds of weights per head dimension). Heads that do not fill a vector (stories260K: 8) take
 * neither kernel's fast path, and a multiple of 64 runs vectorized: both start at `cached`.
 */
export function evalStart(cached: number, total: number, shape: TailShape | undefined): number {
  const tail = total - cached;
  if (!shape || tail >= FA_TILE || cached + tail < FA_TILE) return cached;
  if (shape.headDim % 64 === 0 || shape.headDim % 16 !== 0) return cached;
  const perRow = tail * cached * shape.headLayers * 60 * shape.headDim;
  const widened = (FA_TILE - tail) * shape.weightsPerToken;
  return perRow > widened ? total - FA_TILE : cached;
}
