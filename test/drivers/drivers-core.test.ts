import t from 'tap';
import { LoopGuard, StopFilter, createDriver } from '../../drivers/index.js';
import { collect } from '../helpers/llama.js';
import { startHub, startPool, waitTasks, waitWorkers } from '../helpers/inproc.js';

t.test('echo: deterministic, streamed, honours stop strings and max tokens', async (t) => {
  const d = createDriver({ name: 'echo', options: { token_ms: '1' } });
  const r = await collect(d.chat('one two three. four', {}));
  t.equal(r.text, 'echo: one two three. four');
  t.ok(r.chunks > 1, 'streamed in pieces');
  t.same(r.stats, { tokensIn: 4, tokensOut: 5 });
  t.equal((await collect(d.chat('one two three. four', { stop: ['.'] }))).text, 'echo: one two three');
  t.equal((await collect(d.chat('one two three', { maxTokens: 2 }))).text, 'echo: one ');
  const ac = new AbortController();
  const slow = createDriver({ name: 'echo', options: { latency_ms: '60000' } });
  setTimeout(() => ac.abort(), 20);
  t.equal((await collect(slow.chat('x', { signal: ac.signal }))).text, '', 'abort ends the wait');
});

/** The echo driver's unstreamed answer as it was first written: one piece through a StopFilter, words counted per piece. */
function echoReference(prompt: string, reply: string | undefined, o: { stop?: string[]; maxTokens?: number }): { chunks: string[]; stats: { tokensIn: number; tokensOut: number } } {
  const words = (s: string) => s.match(/\S+/g)?.length ?? 0;
  const answer = reply !== undefined ? reply.split('{prompt}').join(prompt) : `echo: ${prompt}`;
  let piece = answer;
  if (o.maxTokens !== undefined && words(answer) > o.maxTokens) piece = answer.split(/(?<=\s)/).slice(0, o.maxTokens).join('');
  const f = new StopFilter(o.stop ?? []);
  const chunks: string[] = [];
  const text = f.push(piece);
  if (text) chunks.push(text);
  if (!f.stopped) { const rest = f.end(); if (rest) chunks.push(rest); }
  return { chunks, stats: { tokensIn: words(prompt), tokensOut: words(piece) } };
}

t.test('echo: an answer given at once is what chat streams, chunk for chunk, and what it always gave', async (t) => {
  const prompts = ['one two three. four', '', '  lead and trail  ', 'a.b.c ### d', 'x\ny\n'];
  const optsList = [{}, { stop: ['.'] }, { stop: ['###', 'c'] }, { stop: ['echo'] }, { stop: [''] }, { stop: ['zz'] }, { maxTokens: 2 }, { maxTokens: 0 }, { maxTokens: 2, stop: ['tw'] }];
  for (const options of [{}, { reply: 'R {prompt} {prompt}' }, { reply: '' }] as Record<string, string>[]) {
    const d = createDriver({ name: 'echo', options });
    for (const prompt of prompts) {
      for (const o of optsList) {
        const now = d.answerNow!(prompt, o)!;
        const g = d.chat(prompt, o);
        const chunks: string[] = [];
        let r = await g.next();
        while (!r.done) { chunks.push(r.value); r = await g.next(); }
        const what = `${JSON.stringify(options)} ${JSON.stringify(prompt)} ${JSON.stringify(o)}`;
        t.same({ chunks: now.chunks, stats: now.stats }, { chunks, stats: r.value }, what);
        t.same(now, echoReference(prompt, options.reply, o), what);
      }
    }
  }
  t.equal(createDriver({ name: 'echo', options: { token_ms: '1' } }).answerNow!('a', {}), undefined, 'streamed: no answer at once');
  t.equal(createDriver({ name: 'echo', options: { latency_ms: '1' } }).answerNow!('a', {}), undefined, 'delayed: no answer at once');
  t.throws(() => createDriver({ name: 'echo', options: { fail: '1' } }).answerNow!('a', {}), { code: 'SWARM_ERR_TASK_FAILED' });
});

t.test('driver options are validated', async (t) => {
  t.throws(() => createDriver({ name: 'echo', options: { latncy_ms: '1' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => createDriver({ name: 'echo', options: { latency_ms: '-1' } }), { code: 'SWARM_ERR_CONFIG' });
  t.throws(() => createDriver({ name: 'nope', options: {} }), { code: 'SWARM_ERR_CONFIG', message: /known: .*echo/ });
  t.throws(() => createDriver({ name: 'exec', options: {} }), { code: 'SWARM_ERR_CONFIG' });
});

t.test('exec: stdout is the answer, the exit code the sentinel, stop strings end it', async (t) => {
  const d = createDriver({ name: 'exec', options: { cmd: 'tr a-z A-Z; printf " (%s)" "$SWARM_PROMPT"' } });
  t.equal((await collect(d.chat('hello', {}))).text, 'HELLO (hello)');
  t.equal((await collect(d.chat('hello world', { stop: ['WOR'] }))).text, 'HELLO ');
  const bad = createDriver({ name: 'exec', options: { cmd: 'echo oops >&2; exit 3' } });
  await t.rejects(collect(bad.chat('x', {})), { code: 'SWARM_ERR_TASK_FAILED', message: /exit code 3: oops/ });
});

t.test('exec: cancelling kills the whole process group', async (t) => {
  const d = createDriver({ name: 'exec', options: { cmd: 'sleep 60 & sleep 60; echo never' } });
  const ac = new AbortController();
  const g = d.chat('x', { signal: ac.signal });
  const p = collect(g);
  await new Promise((r) => setTimeout(r, 200));
  const [pid] = d.pids();
  t.ok(pid, 'running');
  ac.abort();
  t.equal((await p).text, '');
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) { try { process.kill(-pid!, 0); await new Promise((r) => setTimeout(r, 20)); } catch { gone = true; } }
  t.ok(gone, 'no process of the group is left');
});

t.test('loop guard: the same line more than 5 times in a row trips it', async (t) => {
  const g = new LoopGuard({ maxRepeats: 5 });
  t.notOk(g.push('a\nb\na\n'));
  for (let i = 0; i < 4; i++) t.notOk(g.push('same line\n'));
  t.notOk(g.push('same '), 'a partial line is not counted yet');
  t.notOk(g.push('line\n'), 'five in a row is allowed');
  t.ok(g.push('same line\n'), 'the sixth trips it');
});

t.test('a looping engine is stopped and the task fails with SWARM_ERR_LOOP_DETECTED, not retried', async (t) => {
  const { hub, addr, stop } = await startHub();
  const pool = startPool(addr, 1, { options: { loop: '1', token_ms: '1' } });
  t.teardown(async () => { await pool.stop(); await stop(); });
  await waitWorkers(hub, 1);
  await hub.submit([{ id: 'loop', prompt: 'again' }]);
  t.ok(await waitTasks(hub, 1));
  const rec = hub.store.queue.get('loop')!;
  t.equal(rec.state, 'failed');
  t.equal(rec.error?.code, 'SWARM_ERR_LOOP_DETECTED');
  t.equal(rec.attempts, 1, 'not retried');
});

t.test('a failing engine is retried up to max attempts, then the task fails', async (t) => {
  const { hub, addr, stop } = await startHub({ maxAttempts: 2 });
  const pool = startPool(addr, 2, { options: { fail: '1' } });
  t.teardown(async () => { await pool.stop(); await stop(); });
  await waitWorkers(hub, 2);
  await hub.submit([{ id: 'f', prompt: 'x' }]);
  t.ok(await waitTasks(hub, 1));
  const rec = hub.store.queue.get('f')!;
  t.equal(rec.state, 'failed');
  t.equal(rec.attempts, 2);
  t.equal(rec.error?.code, 'SWARM_ERR_RETRIES_EXHAUSTED');
});
