import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { SwarmError } from '../../protocol/index.js';
import { BatchedDriver, batchedFactory, cachedPrefix, enginePaths, evalStart } from '../../drivers/batched/index.js';
import { EmbeddedDriver } from '../../drivers/embedded/index.js';
import { tempDir } from '../helpers/cli.js';
import { MODELS, STORIES, alive, collect, missingPrereq, until } from '../helpers/llama.js';
import { fixtureNodeArgs } from '../helpers/paths.js';

const model = fs.existsSync(STORIES) ? { model: STORIES } : { missing: `test model ${STORIES} not found (set SWARM_TEST_MODELS)` };

type Stats = { tokensIn: number; tokensOut: number; tokensCached: number };

/** A batched driver on the engine of `dir` (one thread: tests share two cores). */
function driver(dir: string, extra: Record<string, string> = {}): BatchedDriver {
  return new BatchedDriver({ name: 'batched', model: STORIES, options: { dir, threads: '1', idle_ms: '500', ...extra } });
}

/** Stop the drivers, then make sure the engine of `dir` is gone (it would idle out anyway). */
function cleanup(t: { teardown(fn: () => void | Promise<void>): void }, dir: string, drivers: BatchedDriver[]): void {
  t.teardown(async () => {
    const pid = drivers[0]?.enginePid();
    await Promise.all(drivers.map((d) => d.stop()));
    if (pid) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  });
}

t.test('options are validated; per-worker options are accepted', async (t) => {
  t.throws(() => batchedFactory({ name: 'batched', options: { threads: '0' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => batchedFactory({ name: 'batched', options: { nope: '1' } }), { code: 'SWARM_ERR_CONFIG' });
  t.equal((batchedFactory({ name: 'batched', options: { sequences: '25', slots: '2' } }) as BatchedDriver).options.sequences, 25);
});

t.test('the cached prefix is the common start, and at least one token is evaluated', async (t) => {
  t.equal(cachedPrefix([1, 2, 3, 9], [1, 2, 3, 4, 5]), 3);
  t.equal(cachedPrefix([1, 2, 3], [1, 2, 3]), 2);
  t.equal(cachedPrefix([], [1, 2]), 0);
});

t.test('a short tail after a long cached prefix is widened to 64 tokens only where the per-row kernel costs more', async (t) => {
  // The 15M shape: heads of 48, 6 heads x 6 layers, about 6.2M multiply-adds of weights per token.
  const s15 = { headDim: 48, headLayers: 36, weightsPerToken: 6_200_000 };
  t.equal(evalStart(1453, 1465, s15), 1465 - 64, '12 tokens after 1,453: widened');
  t.equal(evalStart(1464, 1465, s15), 1464, 'one token after 1,464: the per-row kernel is cheaper');
  t.equal(evalStart(100, 300, s15), 100, 'a tail of 64 or more takes the tiled kernel as it is');
  t.equal(evalStart(30, 40, s15), 30, 'a prompt shorter than 64 tokens cannot be widened');
  t.equal(evalStart(1453, 1465, { ...s15, headDim: 64 }), 1453, 'heads of 64 run vectorized: not widened');
  t.equal(evalStart(1453, 1465, { ...s15, headDim: 8 }), 1453, 'heads of 8 take neither fast path: not widened');
  t.equal(evalStart(1453, 1465, undefined), 1453, 'flash attention off: not widened');
});

t.test('a long state dir still gets a short socket path', async (t) => {
  const p = enginePaths('/tmp/' + 'x'.repeat(120), { model: '/m.gguf', ctx: 2048, threads: 1 });
  t.ok(Buffer.byteLength(p.socket) < 104, p.socket);
});

t.test('batched answers equal per-worker answers at temperature 0 with the same seed', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const prompts = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park'];
  const ds = prompts.map(() => driver(dir, { sequences: '3' }));
  const emb = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: {} });
  cleanup(t, dir, ds);
  t.teardown(() => emb.stop());
  await Promise.all(ds.map((d) => d.start()));
  t.ok(ds.every((d) => d.enginePid() === ds[0]!.enginePid()), 'one engine for all three');
  t.same(ds[0]!.pids(), [], 'the engine is not a child of any one worker');
  // Decodes and samplings queue on one libuv thread (faster on few cores: drivers/batched/engine-start.ts).
  const environ = fs.readFileSync(`/proc/${ds[0]!.enginePid()}/environ`, 'utf8').split('\0');
  t.ok(environ.includes('UV_THREADPOOL_SIZE=1'), 'the engine runs with one libuv pool thread');
  // At once: the engine batches the three sequences' evaluations.
  const got = await Promise.all(ds.map((d, i) => collect(d.chat(prompts[i]!, { maxTokens: 48, temperature: 0, seed: 7 }))));
  for (const [i, p] of prompts.entries()) {
    const want = await collect(emb.chat(p, { maxTokens: 48, temperature: 0, seed: 7 }));
    t.ok(want.text.length > 0);
    t.equal(got[i]!.text, want.text, `"${p}": same text`);
    t.equal((got[i]!.stats as Stats).tokensIn, (want.stats as Stats).tokensIn, 'same prompt token count');
  }
});

t.test('grammar and JSON-schema output parse; stop strings end the text', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const d = driver(dir);
  cleanup(t, dir, [d]);
  const yn = await collect(d.chat('Is the sky blue?', { grammar: 'root ::= "yes" | "no"', maxTokens: 8, seed: 1 }));
  t.ok(['yes', 'no'].includes(yn.text), yn.text);
  const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] };
  for (const seed of [1, 2, 3]) {
    const js = await collect(d.chat('A person:', { jsonSchema: schema, maxTokens: 64, seed }));
    const v = JSON.parse(js.text) as { name: unknown; age: unknown };
    t.equal(typeof v.name, 'string');
    t.ok(Number.isInteger(v.age), `integer age in ${js.text}`);
  }
  const emb = new EmbeddedDriver({ name: 'embedded', model: STORIES, options: {} });
  t.teardown(() => emb.stop());
  for (const stop of [['Lily'], ['a', 'park']]) {
    const cut = await collect(d.chat('Once upon a time', { maxTokens: 40, temperature: 0, stop }));
    const want = await collect(emb.chat('Once upon a time', { maxTokens: 40, temperature: 0, stop }));
    t.equal(cut.text, want.text, `stop ${JSON.stringify(stop)}: as in per-worker mode`);
    t.notMatch(cut.text, stop[0]!, 'the stop string is not in the text');
  }
  await t.rejects(collect(d.chat('x', { grammar: 'root ::= (' })), { code: 'SWARM_ERR_TASK_FAILED', message: /invalid GBNF/ });
});

t.test('a prefix-cache hit shows in the stats and gives the same text as a miss', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const warm = driver(dir, { sequences: '2' });
  // The miss on an engine without the prefix cache: on the same engine the other sequence would now start from this one's.
  const cold = driver(dir, { sequences: '1', prefix_cache: '0' });
  cleanup(t, dir, [warm, cold]);
  const prefix = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ';
  const a = await collect(warm.chat(prefix + 'One day, she saw a cat.', { maxTokens: 24, temperature: 0 }));
  t.equal((a.stats as Stats).tokensCached, 0, 'first prompt: nothing cached');
  const b = await collect(warm.chat(prefix + 'One day, she saw a big dog.', { maxTokens: 24, temperature: 0 }));
  const sb = b.stats as Stats;
  t.ok(sb.tokensCached >= 25 && sb.tokensCached < sb.tokensIn, `hit: ${sb.tokensCached} of ${sb.tokensIn} prompt tokens cached`);
  const miss = await collect(cold.chat(prefix + 'One day, she saw a big dog.', { maxTokens: 24, temperature: 0 }));
  t.equal((miss.stats as Stats).tokensCached, 0, 'the engine without the prefix cache evaluated it all');
  t.equal(b.text, miss.text, 'hit and miss give the same text');
});

t.test('a prompt starts from another sequence that holds its longest prefix, and gives the same text', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const a = driver(dir, { sequences: '2' });
  const b = driver(dir, { sequences: '2' });
  const plain = driver(dir, { sequences: '1', prefix_cache: '0' });
  cleanup(t, dir, [a, b, plain]);
  const shared = Array.from({ length: 6 }, () => 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.').join(' ');
  const first = await collect(a.chat(shared + ' One day, she saw a cat.', { maxTokens: 16, temperature: 0 }));
  t.equal((first.stats as Stats).tokensCached, 0);
  const hit = await collect(b.chat(shared + ' One day, she saw a big dog.', { maxTokens: 16, temperature: 0 }));
  const sh = hit.stats as Stats;
  t.ok(sh.tokensCached >= 100 && sh.tokensCached < sh.tokensIn, `the other agent's prefix: ${sh.tokensCached} of ${sh.tokensIn} prompt tokens not evaluated again`);
  const want = await collect(plain.chat(shared + ' One day, she saw a big dog.', { maxTokens: 16, temperature: 0 }));
  t.equal(hit.text, want.text, 'the same text as a prompt evaluated whole');
  // The donor's own next prompt still finds its own tokens.
  const again = await collect(a.chat(shared + ' One day, she saw a cat.', { maxTokens: 16, temperature: 0 }));
  t.equal(again.text, first.text);
});

for (const fa of ['on', 'auto'] as const) {
  const widened = fa === 'on';
  t.test(`on heads of 48 with flash_attn=${fa} a short tail after a long prefix is evaluated ${widened ? 'as 64 tokens' : 'as it is'}, copied or its own, and gives the same text`, async (t) => {
    // The 15M shape: its heads take flash attention's slow per-row kernel below 64 query tokens
    // (prefix.ts), so with it on the tail is widened; `auto` turns it off for them, and then nothing is.
    const m15 = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
    if (missingPrereq(t, fs.existsSync(m15) ? {} : { missing: `test model ${m15} not found (set SWARM_TEST_MODELS)` })) return;
    const dir = tempDir(t);
    const mk = (extra: Record<string, string>) => new BatchedDriver({ name: 'batched', model: m15, options: { dir, threads: '1', idle_ms: '500', flash_attn: fa, ...extra } });
    const a = mk({ sequences: '2' });
    const b = mk({ sequences: '2' });
    const plain = mk({ sequences: '1', prefix_cache: '0' });
    cleanup(t, dir, [a, b, plain]);
    const doc = Array.from({ length: 30 }, (_, i) => `Line ${i} of the shared input document says the same thing.`).join(' ');
    await collect(a.chat(`${doc} Agent 0: answer question 0 about the document now.`, { maxTokens: 4, temperature: 0 }));
    for (const q of ['Agent 1: answer question 7 about the document now.', 'Another agent asks what line 12 of the document says.']) {
      const hit = await collect(b.chat(`${doc} ${q}`, { maxTokens: 8, temperature: 0 }));
      const st = hit.stats as Stats;
      if (widened) t.equal(st.tokensCached, st.tokensIn - 64, `${q}: the last 64 of ${st.tokensIn} prompt tokens evaluated`);
      else t.ok(st.tokensIn - st.tokensCached < 64, `${q}: only the ${st.tokensIn - st.tokensCached}-token tail of ${st.tokensIn} evaluated`);
      const want = await collect(plain.chat(`${doc} ${q}`, { maxTokens: 8, temperature: 0 }));
      t.equal(hit.text, want.text, `${q}: the same text as the prompt evaluated whole`);
    }
    const log = fs.readFileSync(enginePaths(dir, { model: m15, ctx: 2048, threads: 1, flashAttn: fa }).log, 'utf8');
    t.match(log, widened ? /flash attention on \(flash_attn=on\)/ : /flash attention off \(auto: head size 48/, 'the engine log says its choice');
  });
}

t.test('flash_attn=off runs and answers; an invalid value is a usage error naming the key', async (t) => {
  t.throws(() => batchedFactory({ name: 'batched', options: { flash_attn: 'maybe' } }), { code: 'SWARM_ERR_CONFIG', message: /flash_attn/ });
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const off = driver(dir, { sequences: '1', flash_attn: 'off' });
  const on = driver(dir, { sequences: '1', flash_attn: 'on' });
  cleanup(t, dir, [off, on]);
  const got = await collect(off.chat('Once upon a time', { maxTokens: 16, temperature: 0 }));
  t.ok(got.text.length > 0, 'an answer with flash attention off');
  await collect(on.chat('Once upon a time', { maxTokens: 16, temperature: 0 }));
  t.not(on.enginePid(), off.enginePid(), 'an engine of its own (the setting is part of the engine key)');
  const log = fs.readFileSync(enginePaths(dir, { model: STORIES, ctx: 2048, threads: 1, flashAttn: 'off' }).log, 'utf8');
  t.match(log, /flash attention off \(flash_attn=off\)/, 'the engine log says it');
});

t.test('prefix_cache=0: no prompt is reused, on an engine of its own, and the text is the same', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const cached = driver(dir, { sequences: '1' });
  const plain = driver(dir, { sequences: '1', prefix_cache: '0' });
  cleanup(t, dir, [cached, plain]);
  const prefix = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ';
  const want = await collect(cached.chat(prefix + 'One day, she saw a cat.', { maxTokens: 24, temperature: 0 }));
  await collect(plain.chat(prefix + 'One day, she saw a cat.', { maxTokens: 24, temperature: 0 }));
  const again = await collect(plain.chat(prefix + 'One day, she saw a cat.', { maxTokens: 24, temperature: 0 }));
  t.not(plain.enginePid(), cached.enginePid(), 'an engine of its own (the setting is part of the engine key)');
  t.equal((again.stats as Stats).tokensCached, 0, 'the same prompt twice: nothing cached');
  t.equal(again.text, want.text, 'the same text as with the cache');
  t.throws(() => driver(dir, { prefix_cache: 'maybe' }), { code: 'SWARM_ERR_CONFIG' });
});

t.test('25 workers on one engine all answer', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const ds = Array.from({ length: 25 }, () => driver(dir, { sequences: '25' }));
  cleanup(t, dir, ds);
  const got = await Promise.all(ds.map((d, i) => collect(d.chat('Once upon a time', { maxTokens: 12, temperature: 0, seed: i }))));
  t.equal(new Set(ds.map((d) => d.enginePid())).size, 1, 'one engine');
  t.ok(got.every((g) => g.text.length > 0), 'every worker answered');
  t.equal(new Set(got.map((g) => g.text)).size, 1, 'temperature 0: the same story from every sequence');
});

t.test('a killed worker frees its sequence and the next worker gets it', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  // The holder starts the engine with one sequence and keeps it generating.
  const child = spawn(process.execPath, [...fixtureNodeArgs('batched-holder.ts'), STORIES, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } });
  const line = await new Promise<string>((resolve) => { let b = ''; child.stdout!.on('data', (x: Buffer) => { b += x; if (b.includes('\n')) resolve(b); }); });
  const { engine } = JSON.parse(line) as { engine: number };
  t.ok(alive(engine), 'engine runs');
  const next = driver(dir, { sequences: '1' });
  cleanup(t, dir, [next]);
  let got = false;
  const starting = next.start().then(() => { got = true; });
  await new Promise((r) => setTimeout(r, 300));
  t.notOk(got, 'the only sequence is taken: the next worker waits');
  child.kill('SIGKILL');
  await starting;
  t.ok(got, 'the killed worker\'s sequence went to the waiting one');
  t.equal(next.enginePid(), engine, 'same engine');
  const r = await collect(next.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
  t.ok(r.text.length > 0);
});

t.test('a worker that finds every sequence taken gives up after seq_wait_ms with ENGINE_START, and gets one once it is free', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const child = spawn(process.execPath, [...fixtureNodeArgs('batched-holder.ts'), STORIES, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } });
  await new Promise<string>((resolve) => { let b = ''; child.stdout!.on('data', (x: Buffer) => { b += x; if (b.includes('\n')) resolve(b); }); });
  const late = driver(dir, { sequences: '1', seq_wait_ms: '400' });
  cleanup(t, dir, [late]);
  const t0 = performance.now();
  const err = await late.start().then(() => undefined, (e: unknown) => e);
  const waited = performance.now() - t0;
  t.ok(err instanceof SwarmError && err.code === 'SWARM_ERR_ENGINE_START', `refused with ENGINE_START: ${(err as Error)?.message}`);
  t.ok(waited >= 350 && waited < 5000, `after about seq_wait_ms (${waited.toFixed(0)} ms)`);
  child.kill('SIGKILL');
  await new Promise((resolve) => { if (child.exitCode !== null || child.signalCode !== null) resolve(undefined); else child.once('exit', resolve); });
  // The engine frees the sequence when it sees the holder's socket close; on a loaded machine that
  // can take longer than this driver's 400 ms wait, so each start may give up and the next one tries.
  t.ok(await until(() => late.start().then(() => true, () => false), 30_000), 'the freed sequence goes to the worker that waited');
  const r = await collect(late.chat('Once upon a time', { maxTokens: 4, temperature: 0 }));
  t.ok(r.text.length > 0, 'the freed sequence serves it');
});

t.test('kill -9 of the engine mid-generation fails the chat with ENGINE_DIED; the next chat starts a new engine', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const d = driver(dir);
  cleanup(t, dir, [d]);
  await d.start();
  const first = d.enginePid()!;
  const g = d.chat('Once upon a time', { maxTokens: 100000, seed: 1 });
  await g.next();
  process.kill(first, 'SIGKILL');
  const err = await (async () => { try { for (;;) { const r = await g.next(); if (r.done) return undefined; } } catch (e) { return e as SwarmError; } })();
  t.equal(err?.code, 'SWARM_ERR_ENGINE_DIED');
  t.ok(await until(() => !alive(first)), 'the old engine is gone');
  const r = await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
  t.ok(r.text.length > 0, 'answered on a new engine');
  t.not(d.enginePid(), first, 'a new engine pid');
});

t.test('the engine exits once its last worker has gone', async (t) => {
  if (missingPrereq(t, model)) return;
  const dir = tempDir(t);
  const d = driver(dir);
  await d.start();
  const pid = d.enginePid()!;
  t.ok(alive(pid));
  const st = fs.statSync(enginePaths(dir, { model: STORIES, ctx: 2048, threads: 1 }).socket);
  t.equal(st.mode & 0o777, 0o600, 'socket is owner-only');
  await d.stop();
  t.ok(await until(() => !alive(pid), 15_000), 'engine exited after idle_ms');
});

t.test('a damaged lock file, or one naming a live process that is not ours, does not hold the engine off', async (t) => {
  if (missingPrereq(t, model)) return;
  for (const [what, content] of [['garbage', 'xx\n'], ['a live pid not of node', '1']] as const) {
    const dir = tempDir(t);
    const paths = enginePaths(dir, { model: STORIES, ctx: 2048, threads: 1 });
    fs.mkdirSync(path.dirname(paths.lock), { recursive: true });
    fs.writeFileSync(paths.lock, content);
    const old = new Date(Date.now() - 10_000);
    fs.utimesSync(paths.lock, old, old);
    // Short start timeout: a lock taken for real would make this start fail.
    const d = driver(dir, { start_timeout_ms: '20000' });
    cleanup(t, dir, [d]);
    await d.start();
    const r = await collect(d.chat('Once upon a time', { maxTokens: 8, temperature: 0 }));
    t.ok(r.text.length > 0, `${what}: the engine started and answered`);
    t.notOk(fs.existsSync(paths.lock), `${what}: the lock is gone once the engine runs`);
  }
});
