import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { LlamaCompletion, LlamaLogLevel } from 'node-llama-cpp';
import { generate } from '../../drivers/batched/generate.js';
import { StepLoop, type StepKind } from '../../drivers/batched/step-loop.js';
import { loadLlama } from '../../drivers/embedded/load-llama.js';
import { findSelfBuiltAddon } from '../../drivers/llama-build/addon-paths.js';
import { MODELS, missingPrereq } from '../helpers/llama.js';

/**
 * A sequence's next chat, started as its last one ends (as the engine's host starts the chat a worker
 * sent ahead: a few promise hops after that end), joins the very next step while another sequence
 * keeps the loop stepping: its sequence sits out no step. The overlapping step awaits its decode, not a
 * turn of the event loop, so it must give one where a chat ended.
 */

const M15 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
const own = findSelfBuiltAddon();
const prereq = !own?.info.options.includes('decodeBatchAndSampleSync')
  ? { missing: 'no self-built addon with the fused step (`swarm engine build --addon` builds one; .ci/run does)' } : {};

t.test('a chat that follows another on its sequence joins the next step (sync and overlapping steps)', async (t) => {
  if (missingPrereq(t, prereq)) return;
  if (missingPrereq(t, fs.existsSync(M15) ? {} : { missing: `test model ${M15} not found (set SWARM_TEST_MODELS)` })) return;
  const { llama } = await loadLlama({ logLevel: LlamaLogLevel.error, logger: () => {}, selfBuilt: true });
  const model = await llama.loadModel({ modelPath: M15 });
  t.teardown(() => model.dispose());
  for (const step of ['sync', 'overlap'] as StepKind[]) {
    const context = await model.createContext({ contextSize: 1024, sequences: 2, threads: 1, flashAttention: false });
    const seqs = [context.getSequence(), context.getSequence()];
    const loop = await StepLoop.create(context, model, seqs[0]!, { step });
    t.ok(loop, 'the loop is made');
    const chat = (i: number, prompt: string, maxTokens: number) => generate({
      model, sequence: seqs[i]!, completion: new LlamaCompletion({ contextSequence: seqs[i]! }), prompt, opts: { maxTokens, temperature: 0 },
      grammar: undefined, signal: new AbortController().signal, onText: () => {}, loop: loop!,
    });
    // Sequence 1 keeps the loop stepping while sequence 0 runs four short chats back to back.
    const long = chat(1, 'Once upon a time', 120);
    for (let k = 0; k < 4; k++) {
      await chat(0, `Tom said ${k}`, 6);
      // The host's own hops between a chat's end and the next one's start (its result sent, its connection's chain).
      for (let h = 0; h < 12; h++) await Promise.resolve();
    }
    await long;
    t.equal(loop!.stats.handoffs, 3, `${step}: three chats followed another on sequence 0`);
    t.equal(loop!.stats.gapSteps, 0, `${step}: and each joined the next step (${loop!.stats.gapSteps} steps sat out)`);
    if (step === 'overlap') t.ok(loop!.stats.overlapped > 0, 'the steps overlapped');
    await context.dispose();
  }
});
