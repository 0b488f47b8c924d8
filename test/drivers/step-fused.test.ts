import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { LlamaCompletion, LlamaLogLevel, type Llama, type LlamaGrammar, type LlamaModel } from 'node-llama-cpp';
import { generate } from '../../drivers/batched/generate.js';
import { StepLoop, type StepKind } from '../../drivers/batched/step-loop.js';
import { loadLlama } from '../../drivers/embedded/load-llama.js';
import { findSelfBuiltAddon } from '../../drivers/llama-build/addon-paths.js';
import type { HostChatOptions } from '../../drivers/embedded/messages.js';
import { MODELS, STORIES, missingPrereq } from '../helpers/llama.js';

/**
 * The engine's decode loop with the self-built addon's one-call steps (decode and every sample in one
 * native call, on the main thread or in one pool job: drivers/llama-build/addon-fused-step.ts) against
 * the split one (decodeBatch, then sampleToken per sequence): the same tokens for the same chats,
 * samplers and seeds, in the same steps. The overlapping step (the text of a step handled while the
 * next decodes, so a chat that a stop string ends has a token decoded past its end) gives the same
 * text too, and so does the chat after it on the same sequence, whose prompt reuses what that
 * sequence's KV cache holds.
 */

const M15 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
const own = findSelfBuiltAddon();
const prereq = !own?.info.options.includes('decodeBatchAndSampleSync')
  ? { missing: 'no self-built addon with the fused step (`swarm engine build --addon` builds one; .ci/run does)' } : {};

type Chat = { prompt: string; opts: HostChatOptions; grammar?: 'json' | 'yesno' };
type Answer = { text: string; tokensOut: number; reason: string };
/** A round of chats, or one made from the round before's answers. */
type Round = Chat[] | ((before: Answer[]) => Chat[]);

/** Run `rounds` of chats, each round's chats at once (one per sequence), on a fresh context with one loop. */
async function script(llama: Llama, model: LlamaModel, rounds: Round[], step: StepKind, overlap?: () => boolean): Promise<{ answers: Answer[][]; steps: number; ran: StepKind; wasted: number; overlapped: number }> {
  const n = 4;
  const context = await model.createContext({ contextSize: 256 * n, sequences: n, threads: 1, flashAttention: false });
  try {
    const seqs = Array.from({ length: n }, () => context.getSequence());
    const loop = await StepLoop.create(context, model, seqs[0]!, { step, ...(overlap ? { overlap } : {}) });
    if (!loop) throw new Error("node-llama-cpp's internals moved: no direct loop");
    const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] } as const;
    const grammars: Record<string, LlamaGrammar> = {
      json: await llama.createGrammarForJsonSchema(schema),
      yesno: await llama.createGrammar({ grammar: 'root ::= "yes" | "no"' }),
    };
    const answers: Answer[][] = [];
    for (const r of rounds) {
      const round = typeof r === 'function' ? r(answers[answers.length - 1]!) : r;
      answers.push(await Promise.all(round.map(async (c, i) => {
        let text = '';
        const g = await generate({
          model, sequence: seqs[i]!, completion: new LlamaCompletion({ contextSequence: seqs[i]! }), prompt: c.prompt, opts: c.opts,
          grammar: c.grammar ? grammars[c.grammar] : undefined, signal: new AbortController().signal, onText: (s) => { text += s; }, loop,
        });
        return { text, tokensOut: g.tokensOut, reason: g.reason };
      })));
    }
    return { answers, steps: loop.stats.steps, ran: loop.step, wasted: loop.stats.wasted, overlapped: loop.stats.overlapped };
  } finally {
    await context.dispose();
  }
}

const STOPPED: Chat[] = [
  { prompt: 'Once upon a time', opts: { maxTokens: 40, temperature: 0, stop: ['Lily', '\n'] } },
  { prompt: 'A person:', opts: { maxTokens: 48, seed: 3 }, grammar: 'json' },
  { prompt: 'Is the sky blue?', opts: { maxTokens: 8, seed: 1 }, grammar: 'yesno' },
  { prompt: 'Then', opts: { maxTokens: 30, temperature: 1, seed: 5 } },
];

const ROUNDS: Round[] = [
  // Greedy, with different lengths: chats end at different steps.
  [0, 1, 2, 3].map((i) => ({ prompt: ['Once upon a time', 'The little dog', 'Lily and Tom went to the park', 'One day a bird'][i]!, opts: { maxTokens: 16 + 10 * i, temperature: 0 } })),
  // Sampled at 0.8 with seeds, all four in the same steps: each sampler's own chain and seed.
  [0, 1, 2, 3].map((i) => ({ prompt: ['Once upon a time', 'The cat', 'A big red ball', 'Tom said'][i]!, opts: { maxTokens: 40, temperature: 0.8, seed: 11 + i } })),
  // Stops, a JSON schema and a grammar beside plain sampling.
  STOPPED,
  // Each sequence's next chat goes on from what the one before said (its prompt, its text, the stop
  // string that ended it): the prefix cache reuses the sequence's tokens, one decoded past that stop included.
  (before) => STOPPED.map((c, i) => ({ prompt: c.prompt + before[i]!.text + (i === 0 ? 'Lily' : ''), opts: { maxTokens: 12, temperature: 0 } })),
];

async function compare(t: Test, file: string): Promise<void> {
  const { llama, path: loaded } = await loadLlama({ logLevel: LlamaLogLevel.error, logger: () => {}, selfBuilt: true });
  t.equal(loaded, 'self-built', 'the self-built addon is loaded');
  const model = await llama.loadModel({ modelPath: file });
  t.teardown(() => model.dispose());
  const split = await script(llama, model, ROUNDS, 'split');
  t.equal(split.ran, 'split', 'the split step when asked for');
  t.ok(split.answers.flat().every((a) => a.tokensOut > 0), 'every chat generated');
  for (const kind of ['sync', 'fused', 'overlap'] as const) {
    const one = await script(llama, model, ROUNDS, kind);
    t.equal(one.ran, kind, `the ${kind} step where the addon has it`);
    // A stop string is seen in a chat's text, a step after its token was sampled: the next one was decoded by then.
    const stopped = split.answers.flat().filter((a) => a.reason === 'customStopTrigger' || a.reason === 'stopGenerationTrigger').length;
    if (kind === 'overlap') t.ok(stopped === 0 || one.wasted >= stopped, `overlap: ${stopped} chat(s) ended by a stop string, ${one.wasted} token(s) decoded past an end, and the text is the same`);
    // A step on the main thread yields to the event loop after it, still running: the next round's
    // chats then arrive together rather than the first alone (a step fewer per round, same tokens).
    if (kind === 'fused') t.equal(one.steps, split.steps, `fused: the same steps (${split.steps})`);
    else if (kind === 'sync') t.ok(one.steps <= split.steps, `sync: no more steps (${one.steps}, split ${split.steps})`);
    for (const [r, round] of split.answers.entries()) {
      for (const [i, want] of round.entries()) t.same(one.answers[r]![i], want, `${kind}, round ${r}, chat ${i}: ${JSON.stringify(want.text.slice(0, 40))}`);
    }
  }
  // The default: the sync step, overlapping when asked before each step (here every other step), so
  // text deferred by an overlapping step is handled by the sync step after it.
  let flip = false;
  const mixed = await script(llama, model, ROUNDS, 'sync', () => (flip = !flip));
  t.ok(mixed.overlapped > 0 && mixed.overlapped < mixed.steps, `sync and overlapping steps in turn (${mixed.overlapped} of ${mixed.steps} overlapped)`);
  t.same(mixed.answers, split.answers, 'the same text, tokens and stop reasons as the split step');
}

t.test('stories260K: a step in one native call samples exactly the tokens the split step does', async (t) => {
  if (missingPrereq(t, prereq)) return;
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  await compare(t, STORIES);
});

t.test('the 15M shape (byte tokens): a step in one native call samples exactly the tokens the split step does', async (t) => {
  if (missingPrereq(t, prereq)) return;
  if (missingPrereq(t, fs.existsSync(M15) ? {} : { missing: `test model ${M15} not found (set SWARM_TEST_MODELS)` })) return;
  await compare(t, M15);
});
