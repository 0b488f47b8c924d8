import t from 'tap';
import { UNIFIED_SCAN_MAX_SHARE, kvLayoutChoice, layerWeights } from '../../drivers/batched/kv-layout.js';
import type { AttentionShape } from '../../drivers/batched/flash-attn.js';

const AVX512 = 'CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AVX512_VNNI = 1 | ';
// The benches' models, as their GGUF metadata gives them.
const M110: AttentionShape = { headDim: 64, heads: 12, kvHeads: 12, layers: 12, dim: 768, ff: 2048 };
const M15: AttentionShape = { headDim: 48, heads: 6, kvHeads: 6, layers: 6, dim: 288, ff: 768 };
const S260K: AttentionShape = { headDim: 8, heads: 8, kvHeads: 4, layers: 5, dim: 64, ff: 172 };
const B7: AttentionShape = { headDim: 128, heads: 32, kvHeads: 32, layers: 32, dim: 4096, ff: 11008 };
const pick = (shape: AttentionShape | undefined, sequences: number, ctx: number, more: Partial<Parameters<typeof kvLayoutChoice>[0]> = {}) =>
  kvLayoutChoice({ setting: 'auto', canUnify: true, flashAttn: 'auto', shape, systemInfo: AVX512, sequences, ctx, ...more });

t.test('auto: unified while flash attention is off or a full cache costs its walk little, a stream per sequence beyond', async (t) => {
  t.equal(layerWeights(M110), 84_934_656, "synth 110M's layers: 85M multiply-adds a token");
  t.same(pick(M110, 8, 512).unified, true, 'synth 110M, 8 agents of 512 tokens');
  t.same(pick(M110, 25, 512).unified, false, 'synth 110M, 25 agents of 512 tokens');
  t.same(pick(M110, 8, 2048).unified, false, "synth 110M, 8 agents of swarm up's 2,048");
  t.same(pick(M110, 25, 512).flashAttn.on, true, 'vectorized heads keep flash attention on in streams');
  t.match(pick(M110, 25, 512).why, /12800 cells .*above 25%/);
  t.same(pick(B7, 25, 2048).unified, true, 'a 7B shape, 25 agents of 2,048: the walk is small beside its weights');
  t.same(pick(M15, 25, 512).unified, true, 'synth 15M, 25 of 512: flash attention off, unified');
  t.same(pick(M15, 8, 2048).unified, true, "synth 15M, 8 of swarm up's 2,048");
  t.match(pick(M15, 25, 512).why, /flash attention off, and attention over a full cache's 12800 cells costs ~\d/);
  t.same(pick(S260K, 25, 512).unified, false, 'stories260K, 25 of 512: attention over all cells would dwarf its weights');
  t.same(pick(S260K, 4, 2048).unified, false, 'stories260K, 4 of 2,048');
  t.same(pick(S260K, 2, 512).unified, true, 'stories260K, 2 of 512');
  t.same(pick(S260K, 25, 512).flashAttn.on, false, 'heads of 8: off');
  t.same(pick(M15, 25, 512).flashAttn.on, false);
  t.same(pick(M15, 25, 2048).unified, false, 'synth 15M, 25 of 2,048: a unified cache would turn flash attention on');
  t.same(pick(M15, 25, 2048).flashAttn.on, false, '... and streams keep it off');
  t.same(pick(undefined, 25, 2048).unified, true, 'shape unknown: unified');
  t.same(pick(M110, 1, 100_000).unified, true, 'one sequence: nothing to walk beside it');
  t.ok(UNIFIED_SCAN_MAX_SHARE > 0 && UNIFIED_SCAN_MAX_SHARE < 1);
});

t.test('a setting or the binding fixes it', async (t) => {
  t.same(pick(M110, 25, 512, { setting: true }).unified, true, 'kv_unified=1');
  t.same(pick(M110, 8, 512, { setting: false }).unified, false, 'kv_unified=0');
  t.same(pick(M110, 8, 512, { canUnify: false }).unified, false, 'the prebuilt binding');
  t.match(pick(M110, 8, 512, { canUnify: false }).why, /prebuilt/);
  t.same(pick(M15, 25, 2048, { setting: true }).flashAttn.on, true, 'forced unified: flash attention as the unified rule has it');
  t.same(pick(M110, 25, 512, { flashAttn: 'off' }).unified, true, 'flash attention forced off: a matrix product the 110M shape carries, unified');
});
