import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { SwarmError } from '../../protocol/index.js';
import { EmbeddedDriver, embeddedFactory, resolveModel } from '../../drivers/embedded/index.js';
import { STORIES, alive, collect, drainError, engineOutlivesOwner, missingPrereq, until } from '../helpers/llama.js';


/** The test model, or the reason it is missing (a failure under CI=true). */
const model = fs.existsSync(STORIES) ? { model: STORIES } : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };

t.test('options are validated', async (t) => {
  t.throws(() => embeddedFactory({ name: 'embedded', options: { threads: '0' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => embeddedFactory({ name: 'embedded', options: { ctx: 'big' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => embeddedFactory({ name: 'embedded', options: { nope: '1' } }), { code: 'SWARM_ERR_CONFIG' });
  const d = embeddedFactory({ name: 'embedded', options: { threads: '2', ctx: '512' } }) as EmbeddedDriver;
  t.equal(d.options.threads, 2);
  t.equal(embeddedFactory({ name: 'embedded', options: {} }) instanceof EmbeddedDriver && (embeddedFactory({ name: 'embedded', options: {} }) as EmbeddedDriver).options.threads, 1, 'one thread by default');
});

t.test('a missing model is an ENGINE_START error that names it', async (t) => {
  const d = new EmbeddedDriver({ name: 'embedded', model: '/nonexistent/model.gguf', options: {} });
  await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START', message: /nonexistent\/model\.gguf/ });
  t.same(d.pids(), []);
});

t.test('a file that is not a GGUF fails to load with the reason', async (t) => {
  const dir = t.testdir({ 'bad.gguf': 'not a model' });
  const d = new EmbeddedDriver({ name: 'embedded', model: path.join(dir, 'bad.gguf'), options: {} });
  await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START', message: /could not load/ });
  t.same(d.pids(), [], 'no engine left running');
});

t.test('an hf: URI fails clearly when offline, and does not hang', async (t) => {
  const dir = t.testdir();
  const prev = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = dir;
  t.teardown(() => { if (prev === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = prev; });
  // Online this would download; here (no network) it must fail with the reason. Either way it ends.
  try {
    const p = await resolveModel('hf:swarm-test/does-not-exist-xyz/model.gguf', { stallMs: 20_000 });
    t.fail(`resolved to ${p}`);
  } catch (err) {
    t.equal((err as SwarmError).code, 'SWARM_ERR_ENGINE_START');
    t.match((err as Error).message, /cannot download hf:swarm-test/);
  }
});

t.test('embedded driver on stories260K', async (t) => {
  if (missingPrereq(t, model)) return;
  const d = new EmbeddedDriver({ name: 'embedded', model: model.model, options: {} });
  t.teardown(() => d.stop());
  await d.start();
  t.equal(d.pids().length, 1, 'one engine process');
  t.ok(d.loadTimes, 'load times are known');
  t.comment(`engine load (ms): ${JSON.stringify(d.loadTimes)}`);
  await d.start();
  t.equal(d.pids().length, 1, 'start is idempotent');

  const full = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 }));
  t.ok(full.text.trim().length > 0, `generates text: ${JSON.stringify(full.text)}`);
  t.ok(full.chunks > 1, 'streamed in chunks');
  t.same(full.stats, { tokensIn: 5, tokensOut: 48 }, 'token counts (prompt with BOS; maxTokens honoured)');

  await t.test('the same seed gives the same sampled text', async (t) => {
    const a = await collect(d.chat('Once upon a time', { maxTokens: 32, temperature: 0.9, seed: 7 }));
    const b = await collect(d.chat('Once upon a time', { maxTokens: 32, temperature: 0.9, seed: 7 }));
    t.equal(a.text, b.text);
  });

  await t.test('stop strings end the answer and are not included', async (t) => {
    t.ok(full.text.includes('.'), 'the unconstrained answer has a full stop');
    const r = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1, stop: ['.'] }));
    t.notOk(r.text.includes('.'), `no stop string in ${JSON.stringify(r.text)}`);
    t.equal(r.text, full.text.slice(0, full.text.indexOf('.')), 'the answer up to the stop string');
    const word = full.text.trim().split(/\s+/)[2]!;
    const r2 = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1, stop: ['zzz', ` ${word}`] }));
    t.equal(r2.text, full.text.slice(0, full.text.indexOf(` ${word}`)), `a multi-character stop string (" ${word}")`);
  });

  await t.test('JSON schema output parses', async (t) => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false };
    for (const seed of [1, 2, 3]) {
      const r = await collect(d.chat('{', { maxTokens: 200, seed, jsonSchema: schema }));
      const obj = JSON.parse(r.text) as { name: unknown; age: unknown };
      t.type(obj.name, 'string', `seed ${seed}: ${r.text}`);
      t.ok(Number.isInteger(obj.age), 'age is an integer');
    }
  });

  await t.test('a grammar constrains output; a bad grammar is a task error', async (t) => {
    const r = await collect(d.chat('Once', { maxTokens: 20, seed: 1, grammar: 'root ::= ("yes" | "no")' }));
    t.match(r.text, /^(yes|no)$/);
    await t.rejects(collect(d.chat('Once', { grammar: 'root ::= (' })), { code: 'SWARM_ERR_TASK_FAILED', message: /grammar/ });
    const after = await collect(d.chat('Tom', { maxTokens: 4, seed: 1 }));
    t.ok(after.text.length > 0, 'the engine serves the next chat');
  });

  await t.test('abort stops the stream and returns', async (t) => {
    const ac = new AbortController();
    const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1, signal: ac.signal });
    let n = 0;
    for await (const _ of g) { if (++n === 5) ac.abort(); }
    t.equal(n, 5, 'no chunk after the abort');
    const pre = new AbortController();
    pre.abort();
    t.same(await collect(d.chat('Once', { signal: pre.signal })), { text: '', stats: {}, chunks: 0 }, 'an aborted signal yields nothing');
    const after = await collect(d.chat('Tom', { maxTokens: 8, seed: 1 }));
    t.ok(after.text.length > 0, 'the engine serves the next chat');
  });

  await t.test('a caller that stops iterating early does not block the next chat', async (t) => {
    const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1 });
    await g.next();
    await g.return(undefined);
    const r = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 }));
    t.equal(r.text, full.text);
  });

  await t.test('engine killed mid-generation: ENGINE_DIED, then the next chat restarts it', async (t) => {
    const [pid] = d.pids();
    const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1 });
    const first = await g.next();
    t.equal(first.done, false, 'generation started');
    process.kill(pid!, 'SIGKILL');
    const err = await drainError(g);
    t.ok(err instanceof SwarmError, 'a SwarmError');
    t.equal((err as SwarmError).code, 'SWARM_ERR_ENGINE_DIED');
    t.match((err as Error).message, /SIGKILL/);
    const r = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 }));
    t.equal(r.text, full.text, 'the restarted engine answers');
    t.equal(d.pids().length, 1);
    t.not(d.pids()[0], pid, 'a new engine process');
  });

  const [pid] = d.pids();
  await d.stop();
  t.same(d.pids(), [], 'stopped');
  t.ok(await until(() => !alive(pid!)), 'the engine process is gone');
  await d.stop();
});

t.test('two chats at once on two slots; stop() during generation ends the chat with SHUTDOWN', async (t) => {
  if (missingPrereq(t, model)) return;
  const d = new EmbeddedDriver({ name: 'embedded', model: model.model, options: { slots: '2' } });
  t.teardown(() => d.stop());
  const [a, b] = await Promise.all([
    collect(d.chat('Once upon a time', { maxTokens: 32, temperature: 0, seed: 1 })),
    collect(d.chat('Once upon a time', { maxTokens: 32, temperature: 0, seed: 1 })),
  ]);
  t.ok(a.text.length > 0);
  t.equal(a.text, b.text, 'both slots answer the same greedy text');
  const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1 });
  await g.next();
  const stopping = d.stop();
  await t.rejects((async () => { for await (const _ of g) { /* drain */ } })(), { code: 'SWARM_ERR_SHUTDOWN' });
  await stopping;
  t.same(d.pids(), []);
});

t.test('no orphan engine after its worker is killed with SIGKILL', async (t) => {
  if (missingPrereq(t, model)) return;
  const r = await engineOutlivesOwner('embedded', model.model);
  t.ok(r.running, 'engine running');
  t.notOk(r.orphaned, 'the engine exits after its worker died');
});

t.test('a prompt longer than the context is refused with CONTEXT_EXCEEDED, not cut; the engine answers the next chat', async (t) => {
  if (missingPrereq(t, fs.existsSync(STORIES) ? {} : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` })) return;
  const d = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: { ctx: '128', threads: '1' } });
  t.teardown(() => d.stop());
  await d.start();
  await t.rejects(collect(d.chat('Once upon a time there was a little dog. '.repeat(40), { maxTokens: 8 })),
    { code: 'SWARM_ERR_CONTEXT_EXCEEDED', message: /prompt is \d+ tokens and the engine's context \d+ tokens per sequence/ });
  const next = await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
  t.ok(next.text.length > 0, 'the next chat is answered');
});
