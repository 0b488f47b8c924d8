import t from 'tap';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Replica, type Entry } from '../../worker/gossip/replica.js';
import { canonicalJson } from '../../protocol/result-mac.js';

// A collection before each heap reading: what is counted is what the replica keeps, not garbage.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapUsed = () => { gc(); gc(); return process.memoryUsage().heapUsed; };
/** The end of the current job: a WeakRef made in it holds its target until then (as a frame's handler ends, in a worker). */
const turn = () => new Promise((r) => setImmediate(r));

/** A fresh flat string of `n` characters (a Buffer's decode: no rope sharing another string's bytes). */
const text = (n: number, seed: number) => {
  const b = Buffer.alloc(n, 97 + (seed % 26));
  b.write(String(seed));
  return b.toString('latin1');
};

t.test('a final entry comes back whole: any string, exactly, with its spec MAC input unchanged', async (t) => {
  const r = new Replica();
  const prompts = ['plain ascii', 'été, naïve, 東京 🚀', 'a lone surrogate \ud800 here', '', 'x'.repeat(20_000)];
  const seen: Entry[] = [];
  r.onChange((e, _d, final) => { if (final) seen.push(e); });
  prompts.forEach((p, i) => {
    const id = `t${i}`;
    r.merge({ id, spec: { id, prompt: p, priority: 2, role: 'r' }, seq: i, spec_mac: 'sw1.x.w-1' });
    r.merge({ id, lease: { worker: 'w-1', attempt: 1, epoch: 0, until: 10 } });
    r.merge({ id, result: { worker: 'w-1', attempt: 1, text: `echo: ${p}`, mac: 'm' } });
  });
  r.merge({ id: 'nospec', result: { worker: 'w-2', attempt: 1, text: 'result before spec' } });
  r.merge({ id: 'noprompt', spec: { id: 'noprompt', role: 'r' }, seq: 9 });
  r.merge({ id: 'noprompt', failure: { worker: 'w-2', attempt: 3, error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'x' } } });
  prompts.forEach((p, i) => {
    const e = r.get(`t${i}`)!;
    t.equal(e.spec!.prompt, p, `prompt ${i} exact`);
    t.equal(e.result!.text, `echo: ${p}`, `text ${i} exact`);
    t.equal(canonicalJson(e.spec), canonicalJson({ id: `t${i}`, prompt: p, priority: 2, role: 'r' }), `spec ${i} as signed`);
    t.same(e.lease, { worker: 'w-1', attempt: 1, epoch: 0, until: 10 });
    t.equal(e.spec_mac, 'sw1.x.w-1');
    t.notOk('blob' in e, 'no internal field leaks out');
    t.equal(seen[i]!.result!.text, `echo: ${p}`, 'listeners saw the whole entry');
  });
  t.equal(r.peek('t1')!.spec!.prompt, undefined, 'stored packed: the prompt is off the object');
  t.equal(r.get('nospec')!.result!.text, 'result before spec');
  t.notOk(r.get('nospec')!.spec);
  t.notOk('prompt' in r.get('noprompt')!.spec!, 'a spec without a prompt gets none');
  // A spec arriving after the result, and a winning result after packing: each keeps the other's string.
  r.merge({ id: 'nospec', spec: { id: 'nospec', prompt: 'late spec' }, seq: 10 });
  t.equal(r.get('nospec')!.spec!.prompt, 'late spec');
  t.equal(r.get('nospec')!.result!.text, 'result before spec');
  const before = r.sizes().blobBytes;
  t.ok(r.merge({ id: 't0', lease: { worker: 'w-1', attempt: 1, epoch: 0, until: 10, revoked: true } }), 'a lease change on a final entry merges');
  t.equal(r.sizes().blobBytes, before, 'and re-encodes nothing');
  t.ok(r.merge({ id: 't0', result: { worker: 'w-0', attempt: 1, text: 'the winner' } }));
  t.equal(r.get('t0')!.result!.text, 'the winner');
  t.equal(r.get('t0')!.result!.worker, 'w-0');
  t.equal(r.get('t0')!.spec!.prompt, 'plain ascii');
  t.notOk(r.merge({ id: 't0', result: { worker: 'w-1', attempt: 1, text: 'echo: plain ascii' } }), 'the loser changes nothing');
  // Fingerprints read only what a shell keeps: a replica fed the whole entries agrees.
  const twin = new Replica();
  for (const id of r.ids()) twin.merge(r.get(id)!);
  t.same(twin.buckets(), r.buckets(), 'packed and whole replicas have the same digest');
  t.same(r.chunk(['t4'], 1 << 20)[0]![0]!.spec!.prompt, prompts[4], 'a sync chunk carries the whole entry');
});

t.test('a replica of N final entries of K bytes keeps them off the JS heap, and frees them with the entries', async (t) => {
  const N = 1500, K = 16 * 1024;
  const r = new Replica();
  const base = heapUsed();
  const ext0 = process.memoryUsage().arrayBuffers;
  for (let i = 0; i < N; i++) {
    const id = `t-${i}`;
    // As a holder gets them from the hub: the spec, a lease, then the result.
    r.merge({ id, spec: { id, prompt: text(K, i) }, seq: i });
    r.merge({ id, lease: { worker: 'w-1', attempt: 1, epoch: 0, until: 1 } });
    r.merge({ id, result: { worker: 'w-1', attempt: 1, text: text(K, i + 7) } });
  }
  const payload = 2 * N * K;
  const grown = heapUsed() - base;
  const ext = process.memoryUsage().arrayBuffers - ext0;
  t.comment(`${N} entries of 2 x ${K} B: heap +${(grown / 2 ** 20).toFixed(1)} MB, array buffers +${(ext / 2 ** 20).toFixed(1)} MB, payload ${(payload / 2 ** 20).toFixed(1)} MB`);
  // On the heap, the strings alone were the payload (1x); what stays there now is ids, leases and shells.
  t.ok(grown < 0.1 * payload, `heap growth ${grown} B under a tenth of the ${payload} B payload`);
  t.ok(r.sizes().blobBytes >= payload && r.sizes().blobBytes <= payload + 64 * N, 'the blobs hold the payload, little more');
  t.ok(ext >= payload * 0.95, 'outside the heap, as buffers');
  t.equal(r.get('t-7')!.spec!.prompt, text(K, 7));
  r.forget(r.ids());
  t.equal(r.sizes().blobBytes, 0, 'evicted: no blob bytes left');
  await turn();
  gc(); gc();
  // Less the evicted ids' ring: allocated at its bound with the first (replica.ts FORGOTTEN_MAX).
  const freed = process.memoryUsage().arrayBuffers - ext0 - r.sizes().forgottenBytes;
  t.ok(freed < payload * 0.05, `buffers freed with the entries (${freed} B left)`);
});

t.test('the replicas of one process share one blob per entry (gossip mode gives every member the whole state)', async (t) => {
  const N = 500, K = 16 * 1024;
  const a = new Replica(), b = new Replica();
  await turn();
  const ext0 = (gc(), process.memoryUsage().arrayBuffers);
  for (let i = 0; i < N; i++) {
    const id = `s-${i}`;
    for (const r of [a, b]) {
      // Each member decodes its own copy of the same entry.
      r.merge({ id, spec: { id, prompt: text(K, i) }, seq: i });
      r.merge({ id, result: { worker: 'w-1', attempt: 1, text: text(K, i + 3) } });
    }
  }
  await turn();
  gc(); gc();
  const ext = process.memoryUsage().arrayBuffers - ext0;
  const payload = 2 * N * K;
  t.ok(ext < 1.2 * payload, `two replicas, ${(ext / payload).toFixed(2)}x the payload outside the heap`);
  t.equal(b.get('s-3')!.result!.text, text(K, 6));
  a.forget(a.ids());
  t.equal(b.get('s-3')!.spec!.prompt, text(K, 3), 'one replica dropping an entry leaves the other whole');
  t.ok(b.merge({ id: 's-3', result: { worker: 'w-0', attempt: 1, text: 'another' } }));
  t.equal(b.get('s-3')!.result!.text, 'another', 'a changed entry gets its own blob');
});
