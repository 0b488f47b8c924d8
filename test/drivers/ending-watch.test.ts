import t from 'tap';
import { EndingWatch } from '../../drivers/batched/ending.js';

/** The batched engine's word that a chat is about to end: its tokens left at its pace so far. */

function run(o: { max?: number; within: number; stepMs: number[]; perStep?: number }): number[] {
  let now = 0;
  const said: number[] = [];
  let count = 0;
  const w = new EndingWatch(o.max, o.within, () => said.push(count), () => now);
  for (const ms of o.stepMs) { now += ms; count += o.perStep ?? 1; w.tokens(o.perStep ?? 1); }
  return said;
}

t.test('says once, when the tokens left at the pace so far take under the lead', async (t) => {
  // 16 tokens, 10 ms each after a first one that waited 50 ms for its prompt: 4 left take 40 ms.
  t.same(run({ max: 16, within: 40, stepMs: [50, ...Array(15).fill(10)] }), [12], 'at 12 of 16');
  t.same(run({ max: 16, within: 5, stepMs: [50, ...Array(15).fill(10)] }), [], 'a lead under one token: never before the end (the result says it)');
  t.same(run({ max: 16, within: 1000, stepMs: Array(16).fill(10) }), [2], 'a lead longer than the chat: as soon as the pace is known');
  t.same(run({ max: undefined, within: 40, stepMs: Array(16).fill(10) }), [], 'no max_tokens: no end to foresee');
  t.same(run({ max: 0, within: 40, stepMs: Array(16).fill(10) }), [], 'max_tokens 0 likewise');
  // A pace that slows (the machine got busy) moves the word later.
  t.same(run({ max: 32, within: 40, stepMs: [10, ...Array(20).fill(10), ...Array(11).fill(40)] }), [31], 'slowed to 40 ms a token: one left');
  t.same(run({ max: 16, within: 40, stepMs: Array(8).fill(10), perStep: 2 }), [8], 'two tokens a step, 5 ms each: 8 left take 40 ms');
});
