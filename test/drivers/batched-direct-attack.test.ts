import fs from 'node:fs';
import t, { type Test } from 'tap';
import { batchedAgents } from '../helpers/batched.js';
import { tempDir } from '../helpers/cli.js';
import { STORIES, collect, drainError, missingPrereq } from '../helpers/llama.js';

/**
 * The batched engine's own decode loop (`loop=direct`) as careless users drive it: every agent's
 * chat cancelled at once mid-generation (a KILL or a run cancelled), then each agent's next chat
 * must give the text a fresh engine gives at temperature 0 (the sequence freed, nothing of the
 * cancelled chat left in it); a prompt longer than the context fails that chat with a clear error
 * while the engine keeps serving the others.
 */

const model = fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };
const PROMPT = 'Lily and Tom went to the park';

const engine = (t: Test, n: number, extra: Record<string, string> = {}) => batchedAgents(t, STORIES, tempDir(t), n, { loop: 'direct', ...extra });

t.test('every chat cancelled at once mid-generation frees its sequence: the next chats answer as on a fresh engine', async (t) => {
  if (missingPrereq(t, model)) return;
  const fresh = await engine(t, 1);
  const want = (await collect(fresh[0]!.chat(PROMPT, { maxTokens: 32, temperature: 0 }))).text;
  await fresh[0]!.stop();
  t.ok(want.length > 0, 'a fresh engine answers');

  const N = 6;
  const ds = await engine(t, N);
  for (let round = 0; round < 2; round++) {
    const ctl = ds.map(() => new AbortController());
    const seen = ds.map(() => 0);
    const running = ds.map(async (d, i) => {
      try { for await (const _ of d.chat(`Once upon a time ${i}`, { maxTokens: 2000, temperature: 0, signal: ctl[i]!.signal })) seen[i]!++; } catch { /* aborted */ }
    });
    const started = Date.now();
    while (seen.some((n) => n === 0) && Date.now() - started < 30_000) await new Promise((r) => setTimeout(r, 20));
    t.ok(seen.every((n) => n > 0), `round ${round}: every agent was generating`);
    for (const c of ctl) c.abort();
    await Promise.all(running);
    t.ok(seen.every((n) => n < 2000), `round ${round}: every chat ended early`);
    const next = await Promise.all(ds.map((d) => collect(d.chat(PROMPT, { maxTokens: 32, temperature: 0 }))));
    for (const [i, r] of next.entries()) t.equal(r.text, want, `round ${round}: agent ${i} answers as a fresh engine`);
  }
});

t.test('a prompt longer than the context fails its chat clearly; the engine serves the others meanwhile and after', async (t) => {
  if (missingPrereq(t, model)) return;
  const ds = await engine(t, 3, { ctx: '256' });
  const long = Array.from({ length: 200 }, () => 'Once upon a time there was a girl.').join(' ');
  const other = collect(ds[1]!.chat(PROMPT, { maxTokens: 64, temperature: 0 }));
  const errs = await Promise.all([drainError(ds[0]!.chat(long, { maxTokens: 8, temperature: 0 })), drainError(ds[2]!.chat(long, { maxTokens: 8, temperature: 0 }))]);
  for (const e of errs) {
    t.ok(e instanceof Error, 'the chat failed');
    t.match(String((e as Error)?.message), /context|tokens/i, `it says why: ${String((e as Error)?.message).slice(0, 160)}`);
  }
  t.ok((await other).text.length > 0, 'the other agent was served meanwhile');
  for (const d of [ds[0]!, ds[2]!]) t.ok((await collect(d.chat(PROMPT, { maxTokens: 16, temperature: 0 }))).text.length > 0, 'and the failed agent answers its next chat');
});
