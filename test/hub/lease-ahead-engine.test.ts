import fs from 'node:fs';
import t from 'tap';
import { workerConfig } from '../../worker/config.js';
import { loadDriver } from '../../drivers/index.js';
import { batchedAgents, engineLog } from '../helpers/batched.js';
import { tempDir } from '../helpers/cli.js';
import { startHub, startPool, waitTasks } from '../helpers/inproc.js';
import path from 'node:path';
import { MODELS, collect, missingPrereq, until } from '../helpers/llama.js';
import { until as poll } from '../helpers/wait.js';

/**
 * A task leased ahead goes on to the batched engine at once (Driver.chatAhead): the engine queues it
 * behind the sequence's running chat and starts it as that one ends. One given back before its turn
 * (the worker's hold expired) is taken back from the engine and never runs there.
 */

/** Tasks of tens of ms (stories260K's take a few, under the hub's prefetch bound, and are queued by prefetch instead). */
const SYNTH = path.join(MODELS, 'synth-llama-15M-shape-q8_0.gguf');
const synth = fs.existsSync(SYNTH) ? { model: SYNTH } : { missing: `test model ${SYNTH} not found (set SWARM_TEST_MODELS)` };

/** The number of chats the engine ran (its `hand-off at exit:` line), once it has exited. */
async function chatsRun(dir: string): Promise<number | undefined> {
  let n: number | undefined;
  await until(() => { n = Number(/hand-off at exit: (\d+) chats/.exec(engineLog(dir))?.[1] ?? NaN); return Number.isFinite(n); }, 15_000);
  return Number.isFinite(n) ? n : undefined;
}

/** A chat under way: `started` once its first text came (it runs on the engine), `text` its whole text. */
function running(g: AsyncGenerator<string, unknown, void>): { started: Promise<void>; text: Promise<string> } {
  let go!: () => void;
  const started = new Promise<void>((r) => { go = r; });
  const text = (async () => { let s = ''; for await (const x of g) { s += x; go(); } go(); return s; })();
  return { started, text };
}

t.test('a chat sent ahead runs as the running one ends, with the text it would have had; one withdrawn never runs', async (t) => {
  if (missingPrereq(t, synth)) return;
  const dir = tempDir(t);
  // The 15M shape: its chats run their 64 tokens (tens of ms), where stories260K's may end at once.
  const [d] = await batchedAgents(t, synth.model, dir, 1);
  const ref = (await collect(d!.chat('Lily went to the park', { maxTokens: 24, temperature: 0 }))).text;

  // Withdrawn while the chat before it runs: answered unrun, and the sequence serves the next chat.
  const a = running(d!.chat('Once upon a time', { maxTokens: 64, temperature: 0 }));
  await a.started;
  const w = d!.chatAhead('Tom had a dog', { maxTokens: 64, temperature: 0 });
  t.ok(w, 'a chat can go ahead behind the running one');
  t.equal(d!.chatAhead('a second', { maxTokens: 4 }), undefined, 'one ahead per sequence');
  d!.withdrawAhead(w!);
  t.ok((await a.text).length > 0);

  // Taken over after the chat before it ended: the same text as sent the usual way.
  const b = running(d!.chat('Once upon a time', { maxTokens: 64, temperature: 0 }));
  await b.started;
  const ahead = d!.chatAhead('Lily went to the park', { maxTokens: 24, temperature: 0 });
  t.ok(ahead);
  await b.text;
  const r = await collect(d!.chat('Lily went to the park', { maxTokens: 24, temperature: 0, ahead }));
  t.equal(r.text, ref, 'the same text as sent after the running chat ended');
  t.ok((await collect(d!.chat('The end', { maxTokens: 4 }))).text.length > 0, 'and the sequence goes on serving');
  await d!.stop();
  t.equal(await chatsRun(dir), 5, 'the engine ran 5 chats: the withdrawn one not at all');
});

// As `swarm worker` does before it connects: the real driver says at the handshake that it tells when a chat ends.
await loadDriver('batched');

/** The batched engine's pid, from its pid file in the state dir `dir`. */
function enginePidIn(dir: string): number | undefined {
  const root = path.join(dir, 'engines');
  const f = fs.existsSync(root) ? fs.readdirSync(root).find((x) => x.endsWith('.pid')) : undefined;
  return f ? Number(fs.readFileSync(path.join(root, f), 'utf8')) : undefined;
}

t.test('batched agents are leased their next task on the engine\'s word (lease-ahead by default): every task once, none given back', async (t) => {
  if (missingPrereq(t, synth)) return;
  const dir = tempDir(t);
  const { hub, addr, stop } = await startHub({});
  t.teardown(stop);
  // A hold far past any step's pace: at the default (4 leads, 160 ms) a loaded machine can hold the
  // engine back longer than that, and a task given back then is the hold doing its job. With this
  // one, a task given back is one the worker refused for another reason.
  const pool = startPool(addr, 2, { driver: 'batched', model: synth.model, options: { dir, threads: '1', idle_ms: '500', sequences: '2' }, config: workerConfig({ agent: { queueHoldMs: 30_000 } }) });
  t.teardown(() => pool.stop());
  const n = 16;
  await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: `Once upon a time ${i}`, id: `e-${i}`, max_tokens: 32, temperature: 0 })));
  t.ok(await waitTasks(hub, n, 120_000), 'all finished');
  t.equal(hub.store.queue.counts().done, n, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  const attempts = Array.from({ length: n }, (_, i) => hub.store.queue.get(`e-${i}`)!.attempts);
  t.same(attempts.filter((a) => a !== 1), [], 'each task used one attempt');
  // Two agents, 16 tasks: each agent's tasks after its first can go ahead.
  t.ok(hub.metrics.leasedQueued >= n / 2, `tasks were leased ahead (${hub.metrics.leasedQueued} of ${n})`);
  t.equal(hub.metrics.queuedGivenBack, 0, 'none given back');
  await pool.stop();
  const ran = await chatsRun(dir);
  t.equal(ran, n, 'the engine ran one chat per task');
  t.match(engineLog(dir), /sent ahead: [1-9]\d* chats/, 'chats went to the engine ahead of their turn');
});

t.test('the engine paused past the hold: tasks queued in it go back, are withdrawn, and every task runs once', async (t) => {
  if (missingPrereq(t, synth)) return;
  const dir = tempDir(t);
  const { hub, addr, stop } = await startHub({});
  t.teardown(stop);
  // Held 5 ms (160 ms for one queued in the engine: 4 leads of 40 ms); the engine stopped for up to 3 s.
  const pool = startPool(addr, 2, { driver: 'batched', model: synth.model, options: { dir, threads: '1', idle_ms: '500', sequences: '2' }, config: workerConfig({ agent: { queueHoldMs: 5 } }) });
  t.teardown(() => pool.stop());
  const n = 24;
  await hub.submit(Array.from({ length: n }, (_, i) => ({ prompt: `Once upon a time ${i}`, id: `p-${i}`, max_tokens: 48, temperature: 0 })));
  // The stop must find a task waiting in a worker's queue. One is leased ahead within a lead (40 ms)
  // of its sequence's running chat's end, and the hub counts it queued until it hears that chat's
  // result: under load the chat can end, and the queued task start, before the stop lands, and then
  // nothing waits to go back. So the engine is stopped again at a later lease ahead, a few times at
  // most, until a stop finds one waiting.
  t.ok(await until(() => hub.metrics.leasedQueued > 0, 60_000), 'a task was leased ahead');
  const pid = enginePidIn(dir);
  t.ok(pid, 'the engine runs');
  t.teardown(() => { try { process.kill(pid!, 'SIGCONT'); } catch { /* gone */ } });
  // Stopped while a lease waits in a worker's queue (more leased than slots): a task leased ahead
  // earlier may have started by now, and one stopped with none waiting has nothing to give back.
  const queuedNow = () => [...hub.registry.all()].some((w) => w.inflight.size > w.slots);
  let stops = 0;
  for (let leased = 0; stops < 5 && hub.metrics.queuedGivenBack === 0; leased = hub.metrics.leasedQueued) {
    // At once as a new lease goes out, polled every few ms: the hub runs in this process.
    let stopped = false;
    await poll(() => {
      if (hub.metrics.leasedQueued > leased && queuedNow()) { process.kill(pid!, 'SIGSTOP'); stopped = true; }
      return stopped || hub.store.queue.counts().queued === 0;
    }, 60_000, 2);
    if (!stopped) break; // nothing left to lease ahead
    stops++;
    await poll(() => hub.metrics.queuedGivenBack > 0, 3000, 10);
    process.kill(pid!, 'SIGCONT');
  }
  t.ok(stops > 0, 'the engine stopped with a task queued ahead of it');
  t.ok(await waitTasks(hub, n, 120_000), 'all finished');
  t.equal(hub.store.queue.counts().done, n, 'lost 0');
  t.equal(hub.metrics.duplicateResults, 0, 'duplicated 0');
  const attempts = Array.from({ length: n }, (_, i) => hub.store.queue.get(`p-${i}`)!.attempts);
  t.same(attempts.filter((a) => a !== 1), [], 'each task used one attempt');
  t.ok(hub.metrics.queuedGivenBack > 0, `the tasks queued ahead went back (${hub.metrics.queuedGivenBack}, ${stops} engine stops)`);
  await pool.stop();
  // A withdrawn chat may have started as the engine resumed, before its withdrawal was read: it ran
  // for no one (no result), which the count shows.
  const ran = await chatsRun(dir);
  t.ok(ran !== undefined && ran >= n && ran <= n + hub.metrics.queuedGivenBack, `the engine ran ${ran} chats for ${n} tasks (${hub.metrics.queuedGivenBack} given back)`);
});
