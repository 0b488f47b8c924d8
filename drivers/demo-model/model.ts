import { encodeGguf, type GgufTensor, type GgufValue } from './gguf.js';
import { demoVocab, type TokenKind } from './vocab.js';

/** Shape of the demo model: tiny, so that it is written in milliseconds and loads in well under a second. */
export const DEMO_SHAPE = { dim: 64, layers: 2, heads: 4, ffn: 192, ctx: 2048 } as const;

/** Bumped whenever the bytes of the demo model change; part of the cached file name. */
export const DEMO_VERSION = 1;

/**
 * Logit bias of each token kind. The embeddings carry a constant feature (dimension 0) that survives
 * the random layers; the output matrix multiplies it by these values. So the noise is mostly whole
 * words and some punctuation, not raw bytes, and the end-of-text token comes now and then.
 */
const BIAS: Record<TokenKind, number> = { control: -2, byte: -2, char: -0.2, prefix: 0.1, punct: 0.5, word: 0.55, eos: 0.53 };

/** Deterministic normal random numbers (mulberry32 + Box-Muller): the same file on every machine. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  const uni = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(uni())) * Math.cos(2 * Math.PI * uni());
}

/** Build the demo model's GGUF bytes: llama architecture, random weights, the demo vocab. */
export function buildDemoModel(): Buffer {
  const { dim, layers, heads, ffn, ctx } = DEMO_SHAPE;
  const vocab = demoVocab();
  const V = vocab.tokens.length;
  const normal = rng(20261122);
  // rows x cols matrix in ggml order (ne = [cols, rows]); std as in the Python synth tool.
  const mat = (name: string, rows: number, cols: number, std = 0.02): GgufTensor => {
    const data = new Float32Array(rows * cols);
    for (let i = 0; i < data.length; i++) data[i] = normal() * std;
    return { name, ne: [cols, rows], data };
  };
  const ones = (name: string): GgufTensor => ({ name, ne: [dim], data: new Float32Array(dim).fill(1) });

  const embd = mat('token_embd.weight', V, dim, 0.05);
  for (let t = 0; t < V; t++) embd.data[t * dim] = 1; // the constant feature
  const out = mat('output.weight', V, dim, 0.5);
  for (let t = 0; t < V; t++) out.data[t * dim] = BIAS[vocab.kinds[t]!];

  const tensors: GgufTensor[] = [embd, ones('output_norm.weight'), out];
  for (let i = 0; i < layers; i++) {
    const p = `blk.${i}.`;
    tensors.push(
      ones(p + 'attn_norm.weight'), ones(p + 'ffn_norm.weight'),
      mat(p + 'attn_q.weight', dim, dim), mat(p + 'attn_k.weight', dim, dim),
      mat(p + 'attn_v.weight', dim, dim), mat(p + 'attn_output.weight', dim, dim),
      mat(p + 'ffn_gate.weight', ffn, dim), mat(p + 'ffn_up.weight', ffn, dim), mat(p + 'ffn_down.weight', dim, ffn),
    );
  }

  const meta: [string, GgufValue][] = [
    ['general.architecture', { str: 'llama' }],
    ['general.name', { str: `swarm-demo-random-v${DEMO_VERSION}` }],
    ['general.description', { str: 'Random weights: its text is noise. A demo model written by swarm, not a trained model.' }],
    ['general.file_type', { u32: 0 }], // all F32
    ['llama.context_length', { u32: ctx }],
    ['llama.embedding_length', { u32: dim }],
    ['llama.block_count', { u32: layers }],
    ['llama.feed_forward_length', { u32: ffn }],
    ['llama.attention.head_count', { u32: heads }],
    ['llama.attention.head_count_kv', { u32: heads }],
    ['llama.rope.dimension_count', { u32: dim / heads }],
    ['llama.attention.layer_norm_rms_epsilon', { f32: 1e-5 }],
    ['llama.vocab_size', { u32: V }],
    ['tokenizer.ggml.model', { str: 'llama' }],
    ['tokenizer.ggml.pre', { str: 'default' }],
    ['tokenizer.ggml.tokens', { strings: vocab.tokens }],
    ['tokenizer.ggml.scores', { f32s: vocab.scores }],
    ['tokenizer.ggml.token_type', { i32s: vocab.types }],
    ['tokenizer.ggml.bos_token_id', { u32: 1 }],
    ['tokenizer.ggml.eos_token_id', { u32: 2 }],
    ['tokenizer.ggml.unknown_token_id', { u32: 0 }],
    ['tokenizer.ggml.add_bos_token', { bool: true }],
    ['tokenizer.ggml.add_eos_token', { bool: false }],
  ];
  return encodeGguf(meta, tensors);
}
