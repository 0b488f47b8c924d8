import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { swarm } from '../helpers/cli.js';
import { MODELS, STORIES, missingPrereq } from '../helpers/llama.js';

t.test('swarm engine which --model says what flash attention the batched engine picks, and why', async (t) => {
  const m15 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
  if (missingPrereq(t, fs.existsSync(STORIES) && fs.existsSync(m15) ? {} : { missing: `test models not found in ${MODELS} (set SWARM_TEST_MODELS)` })) return;
  const one = (m: string, ...more: string[]) => {
    const r = swarm(['engine', 'which', '--model', m, '--json', ...more]);
    t.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { flash_attn: string; flash_attn_why: string; kv: string; sequences: number; ctx: number };
  };
  const s = one(STORIES);
  t.equal(s.flash_attn, 'off', 'stories260K, heads of 8: off on every CPU');
  t.match(s.flash_attn_why, /head size 8/);
  // Heads of 48 fill plain NEON's 16-lane steps but not AVX's 32 or AVX-512's 64.
  t.match(one(m15).flash_attn_why, /head size 48/, 'synth 15M: the reason names its head size');
  // The choice for the engine `swarm up` would start: its sequences and context size count where the KV cache is unified.
  const small = one(m15, '--agents', '8', '--ctx', '512');
  t.same([small.flash_attn, small.sequences, small.ctx], ['off', 8, 512], '8 agents of 512 tokens: off either layout');
  const big = one(m15, '--agents', '25', '--ctx', '2048');
  t.equal(big.flash_attn, big.kv === 'unified' ? 'on' : 'off', `25 agents of 2,048 tokens, KV ${big.kv}`);
  if (big.kv === 'unified') t.match(big.flash_attn_why, /51200 cells, above/);
  t.equal(one(m15, '--agents', '25', '--flash-attn', 'on').flash_attn_why, 'flash_attn=on', 'an explicit setting is taken as it is');
  const text = swarm(['engine', 'which', '--model', STORIES]);
  t.match(text.stdout, /^flash attention\s+off \(auto: head size 8.*; for 4 sequence\(s\) of 2048 tokens, KV /m);
  const missing = swarm(['engine', 'which', '--model', '/nonexistent/model.gguf']);
  t.not(missing.code, 0);
  t.match(missing.stderr, /SWARM_ERR_CONFIG: model not found/);
});
