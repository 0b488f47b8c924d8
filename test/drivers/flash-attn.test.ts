import t from 'tap';
import { UNIFIED_OFF_MAX_CELLS, UNIFIED_OFF_MAX_SEQUENCES, attentionShape, f16Step, flashAttnChoice, type AttentionShape } from '../../drivers/batched/flash-attn.js';

const AVX512 = 'CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AVX512_VNNI = 1 | ';
const AVX2 = 'CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | ';
const NEON = 'CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | ';
const shape = (headDim: number, heads = 6, layers = 6): AttentionShape => ({ headDim, heads, kvHeads: heads, layers, dim: headDim * heads, ff: 768 });

t.test('the f16 step follows the vector width of the CPU variant llama.cpp loaded', async (t) => {
  t.equal(f16Step(AVX512), 64);
  t.equal(f16Step(AVX2), 32);
  t.equal(f16Step(NEON), 32);
  t.equal(f16Step('CPU : NEON = 1 | ARM_FMA = 1 | '), 16, 'NEON without f16 arithmetic');
  t.equal(f16Step('CPU : AVX512 = 1 | AVX512_FP16 = 1 | '), 128);
  t.equal(f16Step('CPU : SSE3 = 1 | '), 32);
  t.equal(f16Step('CPU : '), 0);
});

t.test('auto: off where the per-row kernel runs scalar, on where it is vectorized or the shape unknown', async (t) => {
  t.same(flashAttnChoice('auto', shape(48), AVX512).on, false, 'synth 15M, heads of 48 on AVX-512');
  t.same(flashAttnChoice('auto', shape(8, 8, 5), AVX512).on, false, 'stories260K, heads of 8');
  t.same(flashAttnChoice('auto', shape(64, 12, 12), AVX512).on, true, 'synth 110M, heads of 64');
  t.same(flashAttnChoice('auto', shape(128, 32, 32), AVX2).on, true, 'heads of 128 on AVX2');
  t.same(flashAttnChoice('auto', shape(48), AVX2).on, false, 'heads of 48 on AVX2: 16 of 48 scalar');
  t.same(flashAttnChoice('auto', shape(64), 'CPU : ').on, false, 'no SIMD: everything scalar');
  t.same(flashAttnChoice('auto', shape(48), 'CPU : NEON = 1 | ').on, true, 'heads of 48 on plain NEON: three 16-lane steps');
  t.same(flashAttnChoice('auto', undefined, AVX512).on, true, 'shape unknown: as llama.cpp decides it');
  t.match(flashAttnChoice('auto', shape(48), AVX512).why, /head size 48/);
});

t.test('auto with a unified KV cache: off only for few sequences, where attending over all their cells stays cheaper', async (t) => {
  const unified = (sequences: number) => ({ unified: true, sequences });
  t.same(flashAttnChoice('auto', shape(48), AVX512, unified(4)).on, false, '4 sequences (a diamond debate): off');
  t.same(flashAttnChoice('auto', shape(48), AVX512, unified(UNIFIED_OFF_MAX_SEQUENCES + 1)).on, true, 'more: on');
  t.match(flashAttnChoice('auto', shape(48), AVX512, unified(25)).why, /all 25 sequences of the unified KV cache/);
  t.same(flashAttnChoice('auto', shape(48), AVX512, { unified: false, sequences: 25 }).on, false, 'a KV stream per sequence: off at any count');
  t.same(flashAttnChoice('auto', shape(64), AVX512, unified(25)).on, true, 'vectorized heads: on either way');
  t.same(flashAttnChoice('off', shape(48), AVX512, unified(25)).on, false, 'off is taken as it is');
});

t.test('auto with a unified KV cache of more sequences: off while sequences x ctx stays within the cells bound', async (t) => {
  const kv = (sequences: number, ctx: number) => ({ unified: true, sequences, ctx });
  t.same(flashAttnChoice('auto', shape(48), AVX512, kv(8, 512)).on, false, '8 agents of 512 tokens (the bench): off');
  t.same(flashAttnChoice('auto', shape(48), AVX512, kv(25, 512)).on, false, '25 agents of 512 tokens: off');
  t.same(flashAttnChoice('auto', shape(48), AVX512, kv(8, 2048)).on, false, "8 agents of swarm up's 2,048: off");
  t.same(flashAttnChoice('auto', shape(48), AVX512, kv(25, 2048)).on, true, '25 agents of 2,048 tokens: on');
  t.same(flashAttnChoice('auto', shape(48), AVX512, kv(1, UNIFIED_OFF_MAX_CELLS * 2)).on, false, 'few sequences: off at any size');
  t.match(flashAttnChoice('auto', shape(48), AVX512, kv(25, 512)).why, /at most 12800 cells \(25 sequences of 512 tokens/);
  t.match(flashAttnChoice('auto', shape(48), AVX512, kv(25, 2048)).why, /51200 cells, above 16384/);
  t.same(flashAttnChoice('auto', shape(64), AVX512, kv(8, 512)).on, true, 'vectorized heads: on at any size');
  t.same(flashAttnChoice('on', shape(48), AVX512, kv(8, 512)).on, true, 'on is taken as it is');
});

t.test('on and off are taken as they are', async (t) => {
  t.same(flashAttnChoice('on', shape(48), AVX512), { on: true, why: 'flash_attn=on' });
  t.same(flashAttnChoice('off', shape(64), AVX512), { on: false, why: 'flash_attn=off' });
});

t.test('the shape comes from the GGUF metadata, key length first', async (t) => {
  const meta = (a: object) => ({ fileInfo: { architectureMetadata: a } }) as unknown as Parameters<typeof attentionShape>[0];
  t.same(attentionShape(meta({ embedding_length: 288, block_count: 6, feed_forward_length: 768, attention: { head_count: 6, head_count_kv: 6 } })),
    { headDim: 48, heads: 6, kvHeads: 6, layers: 6, dim: 288, ff: 768 });
  t.equal(attentionShape(meta({ embedding_length: 4096, block_count: 32, attention: { head_count: 32, key_length: 128 } }))?.headDim, 128);
  t.equal(attentionShape(meta({ embedding_length: 64 })), undefined, 'no head count: unknown');
});
