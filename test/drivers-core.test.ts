import t from 'tap';
import { LoopGuard, createDriver } from '../drivers/index.js';
import { collect } from './helpers/llama.js';
import { startHub, startPool, waitTasks, waitWorkers } from './helpers/inproc.js';

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
