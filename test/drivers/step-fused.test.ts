import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { LlamaCompletion, LlamaLogLevel, type Llama, type LlamaGrammar, type LlamaModel } from 'node-llama-cpp';
import { generate } from '../../drivers/batched/generate.js';
import { StepLoop } from '../../drivers/batched/step-loop.js';
import { loadLlama } from '../../drivers/embedded/load-llama.js';
import { findSelfBuiltAddon } from '../../drivers/llama-build/addon-paths.js';
import type { HostChatOptions } from '../../drivers/embedded/messages.js';
import { MODELS, STORIES, missingPrereq } from '../helpers/llama.js';

/**
 * The engine's decode loop with the self-built addon's fused step (decode and every sample in one
 * native call, drivers/llama-build/addon-fused-step.ts) against the split one (decodeBatch, then
 * sampleToken per sequence): the same tokens for the same chats, samplers and seeds, in the same steps.
 */

const M15 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
const own = findSelfBuiltAddon();
const prereq = !own?.info.options.includes('decodeBatchAndSample')
  ? { missing: 'no self-built addon with the fused step (`swarm engine build --addon` builds one; .ci/run does)' } : {};

type Chat = { prompt: string; opts: HostChatOptions; grammar?: 'json' | 'yesno' };
type Answer = { text: string; tokensOut: number; reason: string };

/** Run `rounds` of chats, each round's chats at once (one per sequence), on a fresh context with one loop. */
async function script(llama: Llama, model: LlamaModel, rounds: Chat[][], fused: boolean): Promise<{ answers: Answer[][]; steps: number; fusedLoop: boolean }> {
  const n = Math.max(...rounds.map((r) => r.length));
  const context = await model.createContext({ contextSize: 256 * n, sequences: n, threads: 1, flashAttention: false });
  try {
    const seqs = Array.from({ length: n }, () => context.getSequence());
    const loop = await StepLoop.create(context, model, seqs[0]!, { fused });
    if (!loop) throw new Error("node-llama-cpp's internals moved: no direct loop");
    const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] } as const;
    const grammars: Record<string, LlamaGrammar> = {
      json: await llama.createGrammarForJsonSchema(schema),
      yesno: await llama.createGrammar({ grammar: 'root ::= "yes" | "no"' }),
    };
    const answers: Answer[][] = [];
    for (const round of rounds) {
      answers.push(await Promise.all(round.map(async (c, i) => {
        let text = '';
        const g = await generate({
          model, sequence: seqs[i]!, completion: new LlamaCompletion({ contextSequence: seqs[i]! }), prompt: c.prompt, opts: c.opts,
          grammar: c.grammar ? grammars[c.grammar] : undefined, signal: new AbortController().signal, onText: (s) => { text += s; }, loop,
        });
        return { text, tokensOut: g.tokensOut, reason: g.reason };
      })));
    }
    return { answers, steps: loop.stats.steps, fusedLoop: loop.fused };
  } finally {
    await context.dispose();
  }
}

const ROUNDS: Chat[][] = [
  // Greedy, with different lengths: chats end at different steps.
  [0, 1, 2, 3].map((i) => ({ prompt: ['Once upon a time', 'The little dog', 'Lily and Tom went to the park', 'One day a bird'][i]!, opts: { maxTokens: 16 + 10 * i, temperature: 0 } })),
  // Sampled at 0.8 with seeds, all four in the same steps: each sampler's own chain and seed.
  [0, 1, 2, 3].map((i) => ({ prompt: ['Once upon a time', 'The cat', 'A big red ball', 'Tom said'][i]!, opts: { maxTokens: 40, temperature: 0.8, seed: 11 + i } })),
  // Stops, a JSON schema and a grammar beside plain sampling.
  [
    { prompt: 'Once upon a time', opts: { maxTokens: 40, temperature: 0, stop: ['Lily', '\n'] } },
    { prompt: 'A person:', opts: { maxTokens: 48, seed: 3 }, grammar: 'json' },
    { prompt: 'Is the sky blue?', opts: { maxTokens: 8, seed: 1 }, grammar: 'yesno' },
    { prompt: 'Then', opts: { maxTokens: 30, temperature: 1, seed: 5 } },
  ],
];

async function compare(t: Test, file: string): Promise<void> {
  const { llama, path: loaded } = await loadLlama({ logLevel: LlamaLogLevel.error, logger: () => {}, selfBuilt: true });
  t.equal(loaded, 'self-built', 'the self-built addon is loaded');
  const model = await llama.loadModel({ modelPath: file });
  t.teardown(() => model.dispose());
  const fused = await script(llama, model, ROUNDS, true);
  const split = await script(llama, model, ROUNDS, false);
  t.ok(fused.fusedLoop, 'the loop takes the fused step where the addon has it');
  t.notOk(split.fusedLoop, 'and the split one when told to');
  t.equal(fused.steps, split.steps, `the same steps (${split.steps})`);
  for (const [r, round] of split.answers.entries()) {
    for (const [i, want] of round.entries()) t.same(fused.answers[r]![i], want, `round ${r}, chat ${i}: ${JSON.stringify(want.text.slice(0, 40))}`);
  }
  t.ok(split.answers.flat().every((a) => a.tokensOut > 0), 'every chat generated');
}

t.test('stories260K: the fused step samples exactly the tokens the split step does', async (t) => {
  if (missingPrereq(t, prereq)) return;
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  await compare(t, STORIES);
});

t.test('the 15M shape (byte tokens): the fused step samples exactly the tokens the split step does', async (t) => {
  if (missingPrereq(t, prereq)) return;
  if (missingPrereq(t, fs.existsSync(M15) ? {} : { missing: `test model ${M15} not found (set SWARM_TEST_MODELS)` })) return;
  await compare(t, M15);
});
