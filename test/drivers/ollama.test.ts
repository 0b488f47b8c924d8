/**
 * The ollama driver against a fake Ollama server (test/fixtures/fake-ollama.ts): Ollama cannot be
 * installed on this machine, so the fake follows Ollama's documented REST API instead.
 */
import t from 'tap';
import { SwarmError } from '../../protocol/index.js';
import { NdjsonDecoder, OllamaDriver, ollamaBaseUrl, ollamaFactory } from '../../drivers/ollama/index.js';
import { startFakeOllama } from '../fixtures/fake-ollama.js';
import { collect } from '../helpers/llama.js';
import { until as untilMs } from '../helpers/wait.js';

const until = (cond: () => boolean, ms = 5000) => untilMs(cond, ms, 10);

t.test('OLLAMA_HOST is read the way Ollama reads it', async (t) => {
  t.equal(ollamaBaseUrl(undefined), 'http://127.0.0.1:11434');
  t.equal(ollamaBaseUrl(''), 'http://127.0.0.1:11434');
  t.equal(ollamaBaseUrl('127.0.0.1'), 'http://127.0.0.1:11434');
  t.equal(ollamaBaseUrl('127.0.0.1:5000'), 'http://127.0.0.1:5000');
  t.equal(ollamaBaseUrl(':5000'), 'http://127.0.0.1:5000');
  t.equal(ollamaBaseUrl('0.0.0.0:5000'), 'http://127.0.0.1:5000', 'all interfaces is reached on loopback');
  t.equal(ollamaBaseUrl('http://localhost'), 'http://localhost:80');
  t.equal(ollamaBaseUrl('http://[::1]:5000/'), 'http://[::1]:5000');
  t.equal(ollamaBaseUrl('https://example.com/ollama'), 'https://example.com:443/ollama');
});

t.test('options: model required, unknown options refused, OLLAMA_HOST honoured, option host wins', async (t) => {
  t.throws(() => ollamaFactory({ name: 'ollama', options: {} }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => ollamaFactory({ name: 'ollama', model: 'x', options: { nope: '1' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => ollamaFactory({ name: 'ollama', model: 'x', options: { raw: 'maybe' } }), { code: 'SWARM_ERR_CONFIG' });
  t.equal(new OllamaDriver({ name: 'ollama', model: 'x', options: {} }, { OLLAMA_HOST: '127.0.0.1:4321' }).url, 'http://127.0.0.1:4321');
  t.equal(new OllamaDriver({ name: 'ollama', model: 'x', options: { host: ':999' } }, { OLLAMA_HOST: '127.0.0.1:4321' }).url, 'http://127.0.0.1:999');
});

t.test('NDJSON decoder: lines split anywhere, UTF-8 split across chunks', async (t) => {
  const dec = new NdjsonDecoder();
  const bytes = Buffer.from('{"response":"h\u00e9","done":false}\n\n{"response":"","done":true,"eval_count":2}');
  const out = [];
  for (let i = 0; i < bytes.length; i++) out.push(...dec.push(bytes.subarray(i, i + 1)));
  out.push(...dec.end());
  t.same(out.map((c) => c.response), ['h\u00e9', '']);
  t.equal(out[1]!.eval_count, 2);
});

t.test('ollama driver against the fake Ollama', async (t) => {
  const fake = await startFakeOllama({ models: ['tiny:latest', 'other:7b'] });
  t.teardown(() => fake.close());
  const d = new OllamaDriver({ name: 'ollama', model: 'tiny', options: {} }, { OLLAMA_HOST: fake.host });
  t.teardown(() => d.stop());
  await d.start();
  t.same(d.pids(), [], 'owns no process');

  await t.test('streams the answer and reports token counts from the final line', async (t) => {
    const r = await collect(d.chat('Once upon a time', { maxTokens: 40, temperature: 0, seed: 7 }));
    t.ok(r.chunks > 1, `streamed in ${r.chunks} chunks`);
    t.ok(r.text.length > 0);
    t.same(r.stats, { tokensIn: 5, tokensOut: 40 }, 'prompt_eval_count and eval_count');
    const req = fake.requests.at(-1)!;
    t.same(req, { model: 'tiny', prompt: 'Once upon a time', stream: true, options: { num_predict: 40, temperature: 0, seed: 7 } }, 'the documented request body');
    const again = await collect(d.chat('Once upon a time', { maxTokens: 40, temperature: 0, seed: 7 }));
    t.equal(again.text, r.text, 'deterministic for the same seed');
  });

  await t.test('stop strings end the answer and are not included', async (t) => {
    const full = await collect(d.chat('Tell a story', { maxTokens: 60, seed: 3 }));
    t.ok(full.text.includes('.'), `the free answer has a full stop: ${JSON.stringify(full.text)}`);
    const cut = await collect(d.chat('Tell a story', { maxTokens: 60, seed: 3, stop: ['.'] }));
    t.equal(cut.text, full.text.slice(0, full.text.indexOf('.')));
    t.same((fake.requests.at(-1)!.options as { stop: string[] }).stop, ['.'], 'stop is sent as options.stop');
  });

  await t.test('a stop string that only the driver sees is still honoured', async (t) => {
    // Ollama handles options.stop itself; the driver's filter must hold even if a server does not.
    const full = await collect(d.chat('Another story', { maxTokens: 30, seed: 5 }));
    const word = full.text.split(' ')[3]!;
    const local = new OllamaDriver({ name: 'ollama', model: 'tiny', options: {} }, { OLLAMA_HOST: fake.host });
    const body = local.body.bind(local);
    local.body = (p, o) => { const b = body(p, o); delete (b.options as Record<string, unknown>).stop; return b; };
    const cut = await collect(local.chat('Another story', { maxTokens: 30, seed: 5, stop: [` ${word}`] }));
    t.equal(cut.text, full.text.slice(0, full.text.indexOf(` ${word}`)));
  });

  await t.test('a JSON schema is sent as format and the answer parses', async (t) => {
    const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' }, ok: { type: 'boolean' } }, required: ['name', 'age', 'ok'] };
    const r = await collect(d.chat('Describe a person as JSON', { maxTokens: 200, seed: 1, jsonSchema: schema }));
    t.ok(r.chunks > 1, 'streamed');
    const obj = JSON.parse(r.text) as { name: unknown; age: unknown; ok: unknown };
    t.type(obj.name, 'string');
    t.ok(Number.isInteger(obj.age));
    t.type(obj.ok, 'boolean');
    t.same(fake.requests.at(-1)!.format, schema);
  });

  await t.test('abort ends the stream and closes the request', async (t) => {
    const slow = await startFakeOllama({ tokenDelayMs: 5 });
    t.teardown(() => slow.close());
    const s = new OllamaDriver({ name: 'ollama', model: 'tiny', options: { host: slow.url } });
    const ac = new AbortController();
    let n = 0;
    const g = s.chat('Once', { maxTokens: 100_000, signal: ac.signal });
    let r = await g.next();
    while (!r.done) { if (++n === 5) ac.abort(); r = await g.next(); }
    t.equal(n, 5, 'no chunk after the abort');
    t.ok(await until(() => slow.aborted === 1 && slow.active === 0), 'the server saw the client go and stopped generating');
    const after = await collect(s.chat('Tom', { maxTokens: 4 }));
    t.equal((after.stats as { tokensOut: number }).tokensOut, 4, 'the next chat works');
  });

  await t.test('a caller that stops iterating closes the request too', async (t) => {
    const slow = await startFakeOllama({ tokenDelayMs: 5 });
    t.teardown(() => slow.close());
    const s = new OllamaDriver({ name: 'ollama', model: 'tiny', options: { host: slow.url } });
    let n = 0;
    for await (const _ of s.chat('Once', { maxTokens: 100_000 })) if (++n === 3) break;
    t.ok(await until(() => slow.aborted === 1 && slow.active === 0));
  });

  await t.test('model not found: start fails with a hint, generate gives TASK_FAILED with the 404 error body', async (t) => {
    const missing = new OllamaDriver({ name: 'ollama', model: 'nope', options: { host: fake.url } });
    await t.rejects(missing.start(), { code: 'SWARM_ERR_ENGINE_START', message: /ollama pull nope/ });
    const unchecked = new OllamaDriver({ name: 'ollama', model: 'nope', options: { host: fake.url, check_model: 'false' } });
    await unchecked.start();
    const err = await collect(unchecked.chat('hi', {})).catch((e: unknown) => e);
    t.ok(err instanceof SwarmError);
    t.match(err, { code: 'SWARM_ERR_TASK_FAILED', message: /HTTP 404.*model 'nope' not found/ });
    const tagged = new OllamaDriver({ name: 'ollama', model: 'other:7b', options: { host: fake.url } });
    await tagged.start();
    t.pass('a model with a tag is found');
  });

  await t.test('an error line in the middle of the stream is TASK_FAILED', async (t) => {
    const bad = await startFakeOllama({ failAfterTokens: 3 });
    t.teardown(() => bad.close());
    const s = new OllamaDriver({ name: 'ollama', model: 'tiny', options: { host: bad.url } });
    const got: string[] = [];
    const err = await (async () => { for await (const c of s.chat('Once', { maxTokens: 50 })) got.push(c); })().catch((e: unknown) => e);
    t.match(err, { code: 'SWARM_ERR_TASK_FAILED', message: /error was encountered/ });
    t.ok(got.length > 0 && got.length <= 3, 'the tokens before the error came through');
  });

  await t.test('a grammar is refused with TASK_FAILED (Ollama has none)', async (t) => {
    await t.rejects(collect(d.chat('x', { grammar: 'root ::= "a"' })), { code: 'SWARM_ERR_TASK_FAILED' });
  });
});

t.test('unreachable host: start and chat fail with ENGINE_START', async (t) => {
  const fake = await startFakeOllama();
  const host = fake.host;
  await fake.close(); // the port is now closed: nothing listens there
  const d = new OllamaDriver({ name: 'ollama', model: 'tiny', options: { host } });
  await t.rejects(d.start(), { code: 'SWARM_ERR_ENGINE_START', message: /not reachable/ });
  await t.rejects(collect(d.chat('hi', {})), { code: 'SWARM_ERR_ENGINE_START' });
});

t.test('the fake follows the API: non-streaming answer, version, tags, error bodies', async (t) => {
  const fake = await startFakeOllama();
  t.teardown(() => fake.close());
  const post = (body: unknown) => fetch(`${fake.url}/api/generate`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  const one = await post({ model: 'tiny', prompt: 'Hi there', stream: false, options: { num_predict: 6 } });
  t.match(one.headers.get('content-type'), /application\/json/);
  const j = await one.json() as { done: boolean; response: string; eval_count: number; prompt_eval_count: number; done_reason: string };
  t.equal(j.done, true);
  t.equal(j.eval_count, 6);
  t.equal(j.prompt_eval_count, 3);
  t.equal(j.done_reason, 'length');
  t.ok(j.response.length > 0);
  const streamed = await post({ model: 'tiny', prompt: 'Hi there', options: { num_predict: 6 } });
  t.match(streamed.headers.get('content-type'), /application\/x-ndjson/);
  const lines = (await streamed.text()).trim().split('\n').map((l) => JSON.parse(l) as { response: string; done: boolean });
  t.equal(lines.length, 7, 'six tokens and the final line');
  t.equal(lines.map((l) => l.response).join(''), j.response, 'streamed and whole answers agree');
  t.same((await (await fetch(`${fake.url}/api/version`)).json()), { version: '0.5.7' });
  t.match(await (await fetch(`${fake.url}/api/tags`)).json(), { models: [{ name: 'tiny:latest', details: { format: 'gguf' } }] });
  const nf = await post({ model: 'ghost', prompt: 'x' });
  t.equal(nf.status, 404);
  t.same(await nf.json(), { error: "model 'ghost' not found" });
  const bad = await post('{not json');
  t.equal(bad.status, 400);
  t.type(((await bad.json()) as { error: unknown }).error, 'string');
  const noModel = await post({ prompt: 'x' });
  t.equal(noModel.status, 400);
  const load = await post({ model: 'tiny' });
  t.match(await load.json(), { done: true, done_reason: 'load', response: '' });
});

