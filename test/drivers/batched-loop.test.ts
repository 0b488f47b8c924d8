import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { LlamaLogLevel, type LlamaModel, type Token } from 'node-llama-cpp';
import type { BatchedDriver } from '../../drivers/batched/index.js';
import { CompletionText, loadTextInternals, type StopReason } from '../../drivers/batched/completion-text.js';
import { loadLlama } from '../../drivers/embedded/load-llama.js';
import { batchedAgents, engineLog } from '../helpers/batched.js';
import { tempDir } from '../helpers/cli.js';
import { MODELS, STORIES, collect, missingPrereq } from '../helpers/llama.js';

/**
 * The batched engine's own decode loop (`loop=direct`, drivers/batched/step-loop.ts) against
 * node-llama-cpp's (`loop=library`): the same text, token counts and prompt reuse, chat for chat.
 */

const model = fs.existsSync(STORIES) ? { model: STORIES } : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };
const M15 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');

type Stats = { tokensIn: number; tokensOut: number; tokensCached: number };
const counts = (s: unknown): Stats => { const x = s as Stats; return { tokensIn: x.tokensIn, tokensOut: x.tokensOut, tokensCached: x.tokensCached }; };

/** `n` agents on one engine of `loop` in a fresh dir, stopped with the test. */
async function agents(t: Test, file: string, n: number, extra: Record<string, string>): Promise<{ ds: BatchedDriver[]; dir: string }> {
  const dir = tempDir(t);
  return { ds: await batchedAgents(t, file, dir, n, extra), dir };
}

/** Everything one loop answers to the same script of chats: concurrent, stops, grammar, seeded sampling, shared prefixes. */
async function script(t: Test, file: string, loop: string, extra: Record<string, string> = {}): Promise<unknown[]> {
  const { ds, dir } = await agents(t, file, 4, { loop, ...extra });
  t.match(engineLog(dir), loop === 'direct' ? /own decode loop/ : /node-llama-cpp's decode loop/, `the engine runs the ${loop} loop`);
  const out: unknown[] = [];
  const prompts = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park', 'One day a bird'];
  // At once, with different lengths: the steps batch all four, and chats end at different steps.
  const together = await Promise.all(ds.map((d, i) => collect(d.chat(prompts[i]!, { maxTokens: 20 + 12 * i, temperature: 0 }))));
  out.push(...together.map((r) => [r.text, counts(r.stats)]));
  for (const stop of [['Lily'], ['a', 'park'], ['\n']]) {
    const r = await collect(ds[0]!.chat('Once upon a time', { maxTokens: 40, temperature: 0, stop }));
    out.push([r.text, counts(r.stats)]);
  }
  const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] };
  const js = await collect(ds[1]!.chat('A person:', { jsonSchema: schema, maxTokens: 64, seed: 3 }));
  out.push([js.text, counts(js.stats)]);
  const yn = await collect(ds[1]!.chat('Is the sky blue?', { grammar: 'root ::= "yes" | "no"', maxTokens: 8, seed: 1 }));
  out.push([yn.text, counts(yn.stats)]);
  // Sampled chats one at a time: run together, when a chat steps alone or beside others depends on
  // timing, and ggml's single-row and batched kernels round differently, which a sample at 0.8 can
  // turn into another token (both loops alike; seen once in CI).
  for (const [i, d] of ds.entries()) {
    const r = await collect(d.chat(prompts[i]!, { maxTokens: 32, temperature: 0.8, seed: 11 + i }));
    out.push([r.text, counts(r.stats)]);
  }
  // A long shared start: the second agent copies the first one's cells.
  const doc = Array.from({ length: 4 }, () => 'Once upon a time there was a little girl named Lily who lived in a small house by the sea.').join(' ');
  const a = await collect(ds[2]!.chat(`${doc} One day`, { maxTokens: 12, temperature: 0 }));
  const b = await collect(ds[3]!.chat(`${doc} Then Lily`, { maxTokens: 24, temperature: 0 }));
  out.push([a.text, counts(a.stats)], [b.text, counts(b.stats)]);
  t.ok(counts(b.stats).tokensCached > 32, `the prefix was copied from another sequence (${counts(b.stats).tokensCached} tokens)`);
  return out;
}

t.test('at temperature 0 (and with a seed) both loops answer alike: text, tokens in and out, prompt reuse', async (t) => {
  if (missingPrereq(t, model)) return;
  const library = await script(t, STORIES, 'library');
  const direct = await script(t, STORIES, 'direct');
  t.ok(library.length > 10);
  for (const [i, want] of library.entries()) t.same(direct[i], want, `chat ${i}`);
});

t.test('on the 15M shape (byte tokens) with a KV stream per sequence, both loops answer alike', async (t) => {
  if (missingPrereq(t, fs.existsSync(M15) ? {} : { missing: `test model ${M15} not found (set SWARM_TEST_MODELS)` })) return;
  t.same(await script(t, M15, 'direct', { kv_unified: '0' }), await script(t, M15, 'library', { kv_unified: '0' }));
});

t.test('a chat stopped mid-generation ends at once, and its sequence takes the next chat', async (t) => {
  if (missingPrereq(t, model)) return;
  const { ds } = await agents(t, STORIES, 2, { loop: 'direct', ctx: '2048' });
  const busy = collect(ds[1]!.chat('The little dog', { maxTokens: 400, temperature: 0 }));
  const g = ds[0]!.chat('Once upon a time', { temperature: 0 });
  const first = await g.next();
  t.ok(!first.done && first.value.length > 0, 'text came');
  await g.return(undefined);
  const next = await collect(ds[0]!.chat('Once upon a time', { maxTokens: 16, temperature: 0 }));
  t.ok(next.text.length > 0, 'the next chat on the sequence answers');
  t.equal(counts(next.stats).tokensOut, 16);
  t.equal(counts((await busy).stats).tokensOut, 400, 'the other chat ran to its end meanwhile');
});

t.test('the plain text path releases what the stop-detecting one does, for any token stream', async (t) => {
  if (missingPrereq(t, model)) return;
  const x = await loadTextInternals();
  if (!x) { t.fail("node-llama-cpp's text classes were not found"); return; }
  const { llama } = await loadLlama({ logLevel: LlamaLogLevel.error, logger: () => {}, selfBuilt: false });
  const m: LlamaModel = await llama.loadModel({ modelPath: STORIES });
  t.teardown(() => m.dispose());
  const vocab = m.fileInfo.metadata.tokenizer.ggml.tokens.length;
  // Byte tokens (split characters), the end-of-generation token and ordinary pieces, in random runs.
  const bytes = [...Array(vocab).keys()].filter((i) => /^<0x[89A-F][0-9A-F]>$/.test(m.fileInfo.metadata.tokenizer.ggml.tokens[i]!));
  t.ok(bytes.length > 0, 'the vocabulary has byte tokens');
  let seed = 7;
  const rnd = (n: number): number => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
  const run = (tokens: Token[], full: boolean, max: number): [string, number, StopReason | undefined] => {
    let text = ''; let n = 0;
    const c = new CompletionText(m, x, new Set(), { stops: [], grammar: undefined, maxTokens: max, onText: (s) => { text += s; }, onTokens: (k) => { n += k; } }, full);
    let reason: StopReason | undefined;
    for (const tk of tokens) if ((reason = c.push(tk, false))) break;
    return [text, n, reason];
  };
  for (let k = 0; k < 300; k++) {
    const len = 1 + rnd(24);
    const tokens = Array.from({ length: len }, () => {
      const r = rnd(10);
      return (r < 4 ? bytes[rnd(bytes.length)]! : r === 4 && rnd(4) === 0 ? m.tokens.eos! : rnd(vocab)) as Token;
    });
    const max = rnd(3) === 0 ? 1 + rnd(len) : 0;
    t.same(run(tokens, false, max), run(tokens, true, max), `stream ${k}`, { diagnostic: false });
  }
});
