import t from 'tap';
import { SwarmError } from '../../protocol/index.js';
import { LlamaServerDriver, SseDecoder, llamaServerFactory } from '../../drivers/llama-server/index.js';
import { collect, drainError, engineOutlivesOwner, llamaPrereqs, missingPrereq } from '../helpers/llama.js';


t.test('SSE decoder: split lines, split UTF-8, comments, error events', async (t) => {
  const dec = new SseDecoder();
  const bytes = Buffer.from(': ping\n\ndata: {"content":"h\u00e9","stop":false}\n\ndata: {"content":"","stop":true,"tokens_predicted":2}\nerror: {"message":"bad"}\n');
  const events = [];
  for (let i = 0; i < bytes.length; i++) events.push(...dec.push(bytes.subarray(i, i + 1)));
  events.push(...dec.end());
  t.same(events.map((e) => e.kind), ['data', 'data', 'error']);
  t.equal(events[0]!.kind === 'data' && events[0]!.data.content, 'h\u00e9');
  t.equal(events[2]!.kind === 'error' && events[2]!.data.message, 'bad');
});

t.test('options are validated', async (t) => {
  t.throws(() => llamaServerFactory({ name: 'llama-server', options: { slots: '0' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => llamaServerFactory({ name: 'llama-server', options: { nope: '1' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => llamaServerFactory({ name: 'llama-server', options: { url: 'ftp://x' } }), { code: 'SWARM_ERR_CONFIG' });
});

t.test('a missing model is an ENGINE_START error with the engine output', async (t) => {
  const p = llamaPrereqs('llama-server');
  if (missingPrereq(t, p)) return;
  const d = new LlamaServerDriver({ name: 'llama-server', model: '/nonexistent/model.gguf', options: {} });
  await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START' });
  t.same(d.pids(), []);
});

t.test('llama-server driver on stories260K', async (t) => {
  const p = llamaPrereqs('llama-server');
  if (missingPrereq(t, p)) return;
  const d = llamaServerFactory({ name: 'llama-server', model: p.model, options: { slots: '2', threads: '1' } });
  t.teardown(() => d.stop());
  await d.start();
  t.equal(d.pids().length, 1, 'one engine process');

  const full = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 }));
  t.ok(full.text.trim().length > 0, `generates text: ${JSON.stringify(full.text)}`);
  t.same(full.stats, { tokensIn: 5, tokensOut: 48 }, 'token counts from the engine');

  await t.test('stop strings end the answer and are not included', async (t) => {
    t.ok(full.text.includes('.'), 'the unconstrained answer has a full stop');
    const r = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1, stop: ['.'] }));
    t.notOk(r.text.includes('.'), `no stop string in ${JSON.stringify(r.text)}`);
    t.equal(r.text, full.text.slice(0, full.text.indexOf('.')), 'the answer up to the stop string');
  });

  await t.test('a prompt past the slot context is CONTEXT_EXCEEDED (not retried), and the slot answers next', async (t) => {
    // 2,048 tokens a slot (ctx 4,096 over 2 slots); this prompt is about 2,750.
    await t.rejects(collect(d.chat('Once upon a time there was a little dog. '.repeat(250), { maxTokens: 8 })), { code: 'SWARM_ERR_CONTEXT_EXCEEDED' });
    const r = await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
    t.ok(r.text.length > 0, 'answered');
  });

  await t.test('JSON schema output parses', async (t) => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false };
    const r = await collect(d.chat('{', { maxTokens: 120, seed: 3, jsonSchema: schema }));
    const obj = JSON.parse(r.text) as { name: unknown; age: unknown };
    t.type(obj.name, 'string');
    t.ok(Number.isInteger(obj.age), 'age is an integer');
  });

  await t.test('a grammar constrains output', async (t) => {
    const r = await collect(d.chat('Once', { maxTokens: 20, seed: 1, grammar: 'root ::= ("yes" | "no")' }));
    t.match(r.text, /^(yes|no)$/);
  });

  await t.test('abort stops the stream and returns', async (t) => {
    const ac = new AbortController();
    const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1, signal: ac.signal });
    let n = 0;
    for await (const _ of g) { if (++n === 5) ac.abort(); }
    t.ok(n >= 5, 'got chunks before the abort');
    const after = await collect(d.chat('Tom', { maxTokens: 8, seed: 1 }));
    t.ok(after.text.length > 0, 'the engine serves the next chat');
  });

  await t.test('shared mode: a second driver uses the running engine and spawns nothing', async (t) => {
    const url = (d as LlamaServerDriver).url!;
    const shared = llamaServerFactory({ name: 'llama-server', options: { url } });
    await shared.start();
    t.same(shared.pids(), [], 'no engine of its own');
    const [a, b] = await Promise.all([
      collect(shared.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 })),
      collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 })),
    ]);
    t.equal(a.text, full.text, 'same answer through the shared engine');
    t.equal(b.text, full.text, 'and concurrently through the owner');
    await shared.stop();
    t.equal(d.pids().length, 1, 'stopping a shared driver leaves the engine running');
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
    const r = await collect(d.chat('Once upon a time', { maxTokens: 48, temperature: 0, seed: 1 }));
    t.equal(r.text, full.text, 'the restarted engine answers');
    t.not(d.pids()[0], pid, 'a new engine process');
  });

  await d.stop();
  t.same(d.pids(), [], 'stopped');
});

t.test('no orphan engine after its worker is killed with SIGKILL', async (t) => {
  const p = llamaPrereqs('llama-server');
  if (missingPrereq(t, p)) return;
  const r = await engineOutlivesOwner('llama-server', p.model);
  t.ok(r.running, 'engine running');
  t.notOk(r.orphaned, 'the engine exits after its worker died');
});
